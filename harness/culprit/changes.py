"""What differs between a row's last good image G and first bad B: the package changes the
culprit search swaps, and what no swap undoes (interpreter, OS, CUDA, driver). Once a change
is proved, `code_answers` sets both releases' code diff against `explain`'s call sites; a
release that cannot be had is one line, never a failure.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.analysis.codediff import (
    NOT_FETCHED,
    CodeAnswer,
    answer,
    attributed_modules,
    diff,
    not_fetched,
    part_of,
)
from harness.analysis.where import parse_where
from harness.answers.kept import Explanation, load_explanations
from harness.answers.search import TOOLING, fingerprint_diff
from harness.explain import kinds_for
from harness.matrixfile.lockfile import line_of
from harness.result.model import CellResult
from harness.runtimes.sources import Release, SourcesUnavailable, release

__all__ = ["NOT_FETCHED", "Change", "CodeAnswer", "Difference", "Fetch", "changes",
           "code_answers", "difference", "for_row", "in_lock", "proved", "step_lines",
           "workaround"]


@dataclass(frozen=True, order=True)
class Change:
    """One package's move from G to B (None: absent on that side)."""

    name: str
    good: str | None
    bad: str | None

    @property
    def kind(self) -> str:
        return "added" if self.good is None else "removed" if self.bad is None else "changed"

    def __str__(self) -> str:
        if self.good is None:
            return f"{self.name} added ({self.bad})"
        if self.bad is None:
            return f"{self.name} removed ({self.good})"
        return f"{self.name} {self.good} -> {self.bad}"

    def undone(self) -> str:
        """B with this change undone, in words: 'multidict 6.4.4' or 'without foo'."""
        return f"{self.name} {self.good}" if self.good is not None else f"without {self.name}"

    def applied(self) -> str:
        return f"{self.name} {self.bad}" if self.bad is not None else f"without {self.name}"

    def to_dict(self) -> dict[str, str | None]:
        return {"name": self.name, "good": self.good, "bad": self.bad, "kind": self.kind}


@dataclass(frozen=True)
class Difference:
    good: str                                # G's image label
    bad: str                                 # B's image label
    packages: tuple[Change, ...]             # what the search swaps, by name
    other: tuple[tuple[str, str, str], ...] = field(default=())  # (what, G, B) not swapped

    def lines(self) -> list[str]:
        out = [f"{len(self.packages)} package change(s) from {self.good} to {self.bad}:"]
        out += [f"  {c}" for c in self.packages]
        if self.other:
            out.append("not swapped (outside the packages):")
            out += [f"  {what}: {g} -> {b}" for what, g, b in self.other]
        return out

    def to_dict(self) -> dict[str, object]:
        return {"good": self.good, "bad": self.bad,
                "packages": [c.to_dict() for c in self.packages],
                "other": [{"what": w, "good": g, "bad": b} for w, g, b in self.other]}


def changes(good: Mapping[str, str], bad: Mapping[str, str]) -> tuple[Change, ...]:
    """Each package whose version differs or that one side lacks, but the installers."""
    names = sorted((set(good) | set(bad)) - TOOLING)
    return tuple(Change(n, good.get(n), bad.get(n)) for n in names
                 if good.get(n) != bad.get(n))


def difference(good: CellResult, bad: CellResult) -> Difference:
    """G against B: package changes to search, and the rest (less image ref and digest,
    which every hybrid has its own of)."""
    other = tuple((what, g, b) for what, g, b in fingerprint_diff(good, bad)
                  if not what.startswith("pip ") and what not in ("image", "digest"))
    tooling = tuple((f"pip {n}", str(good.fingerprint.packages.get(n, "-")),
                     str(bad.fingerprint.packages.get(n, "-"))) for n in sorted(TOOLING)
                    if good.fingerprint.packages.get(n) != bad.fingerprint.packages.get(n))
    return Difference(good.image.label, bad.image.label,
                      changes(good.fingerprint.packages, bad.fingerprint.packages),
                      other + tooling)


def workaround(answer: Sequence[Change], image: str, lock: str | None = None) -> str:
    """The pins to change in B and the commands that do it, plus the proving hybrid's tag
    where it is an engine image, or each pin's line where B's pins are a lock file's."""
    pins = [f"{c.name}=={c.good}" for c in answer if c.good is not None]
    gone = [c.name for c in answer if c.good is None]
    fix = " and ".join(filter(None, [f"pin {' '.join(pins)}" if pins else "",
                                     f"uninstall {' '.join(gone)}" if gone else ""])) + " in B"
    commands = ([f"`pip install {shlex.join(pins)}`"] if pins else []) + (
        [f"`pip uninstall -y {shlex.join(gone)}`"] if gone else [])
    said = f"{fix}: {' then '.join(commands)} in B's environment"
    if "/" in image or ":" in image:
        return f"{said}; `{image}` on the engine is B with that change, proved."
    if lock is not None:
        return f"{said} (in B's lock: {in_lock(answer, lock)})."
    where = " and ".join(filter(None, [
        f"{' '.join(pins)} in B's `pip:` list" if pins else "",
        f"{' '.join(gone)} out of it" if gone else ""]))
    return f"{said} (in the matrix: {where})."


def in_lock(answer: Sequence[Change], lock: str) -> str:
    """Each change as made in B's lock file, then locked again: "new.txt:2,
    multidict==6.6.3 -> multidict==6.4.4, then lock again"."""
    said = []
    for c in answer:
        at = line_of(Path(lock), c.name) if c.bad is not None else None
        where = f"{lock}:{at}" if at is not None else lock
        said.append(f"{where}, {c.name}=={c.bad} -> {c.name}=={c.good}" if c.good and c.bad
                    else f"{where}, {c.name}=={c.bad} out of it" if c.bad
                    else f"{where}, {c.name}=={c.good} added")
    return "; ".join(said) + ", then lock again"


# Beyond the package: the function its change changed
# (name, version) -> that release's files; raises SourcesUnavailable.
Fetch = Callable[[str, str], Release]


def proved(culprit: Mapping[str, object] | None) -> list[tuple[str, str | None, str | None]]:
    """(name, good version, bad version) of each change culprit proved."""
    if culprit is None or culprit.get("status") != "found":
        return []
    found = culprit.get("answer")
    out: list[tuple[str, str | None, str | None]] = []
    for c in found if isinstance(found, list) else []:
        if isinstance(c, dict) and isinstance(c.get("name"), str):
            good, bad = c.get("good"), c.get("bad")
            out.append((c["name"], None if good is None else str(good),
                        None if bad is None else str(bad)))
    return out


def _one_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def code_answers(culprit: Mapping[str, object] | None, where: Explanation | None,
                 fetch: Fetch = release, kinds: Sequence[str] = ()) -> list[CodeAnswer]:
    """Each proved change's code against the bad cell's attributed sites, weighed by the
    first of `kinds` that has any; none without a proved change or a where record."""
    changes = proved(culprit)
    if not changes or where is None or not where.record:
        return []
    w = parse_where(where.record)
    part = part_of(w, where.table[0][0] if where.table else None, kinds or where.kinds)
    out: list[CodeAnswer] = []
    for name, good, bad in changes:
        if good is None or bad is None:
            out.append(CodeAnswer(name, good or "-", bad or "-", "no diff",
                                  f"{name} {good or '-'} -> {bad or '-'}: the package "
                                  f"{'came' if good is None else 'went'}; no two releases "
                                  "to diff"))
            continue
        try:
            old, new = fetch(name, good), fetch(name, bad)
        except (SourcesUnavailable, OSError, ValueError) as exc:
            out.append(not_fetched(name, good, bad, _one_line(exc)))
            continue
        files = sorted(old.files.keys() | new.files.keys())
        wanted = attributed_modules(w, part, files) if part is not None else set()
        changed = diff(old.files, new.files, also=wanted)
        out.append(answer(name, good, bad, changed, files, w, part,
                          (old.filename, new.filename)))
    return out


def step_lines(culprit: Mapping[str, object] | None, where: Explanation | None,
               fetch: Fetch = release, kinds: Sequence[str] = ()
               ) -> tuple[list[CodeAnswer], list[str]]:
    """The journey's code step: its answers and its lines (one at least)."""
    if not proved(culprit):
        return [], ["no package change proved: no code to read"]
    if where is None or not where.record:
        return [], ["no where record from explain to read the change against"]
    found = code_answers(culprit, where, fetch, kinds)
    return found, [a.words for a in found]


def explanation_of(root: Path, results: Mapping[str, CellResult], cell: str
                   ) -> Explanation | None:
    """The cell's where.json while the cells it rests on are the runs it was made from."""
    ex = load_explanations(root).get(cell)
    if ex is None or (ex.derived is not None and ex.derived.changed(results)):
        return None
    return ex


def for_row(root: Path, results: Mapping[str, CellResult], bad: str,
            culprit: Mapping[str, object], fetch: Fetch = release) -> list[CodeAnswer]:
    """`harness culprit`'s code answer for a row whose bad cell has a current where.json."""
    return code_answers(culprit, explanation_of(root, results, bad), fetch,
                        kinds_for(results[bad]) if bad in results else ())
