"""Beyond the package: the function its change changed. Once `culprit` has proved a
package change (culprit.json's answer) and `explain` has attributed the first bad cell's
late samples or growth to call sites (its where.json), both releases' code is read from
the index (`runtimes.sources.release`: the sdist or a pure wheel, cached), diffed
(`analysis.codediff`) and set against the attributed sites (`analysis.codesites`):
"werkzeug 2.2.3 -> 2.3.0: `http.py: parse_options_header` changed (58 lines) and holds
48 % of the late samples". For `harness culprit` (`for_row`) and the journey's code step
(`step_lines`). A release that cannot be had is one line ("code not read: ..."), never
a failure of the command.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from harness.analysis.codediff import diff
from harness.analysis.codesites import (
    NOT_FETCHED,
    CodeAnswer,
    answer,
    attributed_modules,
    not_fetched,
    part_of,
)
from harness.analysis.whererecord import parse_where
from harness.answers.explained import Explanation, load_explanations
from harness.explain.plan import kinds_for
from harness.result.model import CellResult
from harness.runtimes.sources import Release, SourcesUnavailable, release

__all__ = ["NOT_FETCHED", "CodeAnswer", "Fetch", "code_answers", "for_row", "proved",
           "step_lines"]

# (name, version) -> that release's files; raises SourcesUnavailable.
Fetch = Callable[[str, str], Release]


def proved(culprit: Mapping[str, object] | None) -> list[tuple[str, str | None, str | None]]:
    """(name, good version, bad version) of each change culprit proved; none unless it
    found the cause."""
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
    """Each proved change's code against the first bad cell's attributed sites (its
    where record), weighed by the first of `kinds` (the verdict's attribution kinds, in
    its order: `explain.plan.kinds_for`) that has any; none without a proved change
    or a where record."""
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
    """`harness culprit`'s code answer for a row whose first bad cell `bad` has a
    where.json that holds; none where it has none."""
    return code_answers(culprit, explanation_of(root, results, bad), fetch,
                        kinds_for(results[bad]) if bad in results else ())
