"""`harness culprit`: which change between a row's last good image G and first bad B made B
bad, proved both ways by hybrids (B with changes undone, G with them applied; picked by
`culprit.search`) run through the sweep's stages against G. Local hybrids are venvs of the
pins swapped (`--no-deps` where the resolver refuses); an unbuildable one is untestable.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.analysis.kinds import BAD, BROKE, KINDS, UNDECIDED
from harness.answers.search import TOOLING, free_of
from harness.bisect import attempts, run_attempt
from harness.culprit.changes import Change, Difference, difference, workaround
from harness.culprit.search import (
    APPLY,
    FOUND,
    OUTSIDE,
    UNDO,
    UNTESTABLE,
    Search,
    find_culprit,
    held_together,
)
from harness.culprit.search import (
    BAD as PROBE_BAD,
)
from harness.culprit.search import (
    GOOD as PROBE_GOOD,
)
from harness.errors import EnvironmentUnavailable
from harness.matrixfile.lockfile import carried
from harness.matrixfile.model import Cell, ImageSpec
from harness.result.model import CellResult, cell_text
from harness.store.gate import why_not_current

if TYPE_CHECKING:
    from harness.protocol.series import Series
    from harness.stages.orchestrator import Sweep

Say = Callable[[str], None]
Runner = Callable[[Cell], CellResult]
# A hybrid image for (side, changes); raises EnvironmentUnavailable where it cannot be had.
Maker = Callable[[str, tuple[Change, ...]], ImageSpec]
# A hybrid that crashes or hangs has not shown B's fault: untestable, not bad.
BROKEN = BROKE
SWAPPED = "swapped"   # --swap: the named set swapped both ways, not proved the cause


@dataclass(frozen=True)
class ProbeRun:
    """One probe as it ran: the hybrid, its verdict and what the search read from it."""

    side: str                       # UNDO: B with `changes` undone; APPLY: G with them
    changes: tuple[Change, ...]
    outcome: str                    # good, bad, untestable
    image: str                      # the hybrid's label (or G's, B's own where equal)
    result: CellResult | None
    how: str                        # "run", "G's sweep cell", "B's sweep cell", "cached"
    seconds: float = 0.0
    # What pip installed beyond the recipe: "propcache 0.5.4 (not in the recipe)".
    drift: tuple[str, ...] = ()

    @property
    def no_deps(self) -> str | None:
        """Why the resolver refused the pins, where they went in `--no-deps`."""
        return self.result.image.labels.get("no-deps") if self.result is not None else None

    def words(self) -> str:
        base = "B" if self.side == UNDO else "G"
        swapped = ", ".join(c.undone() if self.side == UNDO else c.applied()
                            for c in self.changes)
        said = cell_text(self.result) if self.result is not None else self.outcome
        drift = f"; pip also put in {', '.join(self.drift)}" if self.drift else ""
        loose = f"; installed --no-deps: {self.no_deps}" if self.no_deps else ""
        return (f"{base} with {swapped}: {said} -> {self.outcome} [{self.image}, "
                f"{self.how}{drift}{loose}]")

    def to_dict(self) -> dict[str, object]:
        return {"side": self.side, "changes": [c.name for c in self.changes],
                "outcome": self.outcome, "image": self.image, "how": self.how,
                "verdict": self.result.verdict if self.result is not None else None,
                "text": cell_text(self.result) if self.result is not None else None,
                "cell": self.result.id if self.result is not None else None,
                "seconds": round(self.seconds, 1), "drift": list(self.drift),
                "no_deps": self.no_deps}


def drift_of(image: ImageSpec, result: CellResult) -> tuple[str, ...]:
    """What the hybrid has installed that its recipe did not say ("name version")."""
    seen = {n: v for n, v in result.fingerprint.packages.items() if n not in TOOLING}
    if not seen:
        return ()
    wanted = dict(p.split("==", 1) for p in image.pip)
    return tuple(f"{n} {v}" + (f" (recipe {wanted[n]})" if n in wanted else "")
                 for n, v in sorted(seen.items()) if wanted.get(n) != v)


@dataclass
class CulpritOutcome:
    row: str
    good: CellResult
    bad: CellResult
    diff: Difference
    search: Search[Change] | None = None
    probes: list[ProbeRun] = field(default_factory=list)
    seconds: float = 0.0
    not_bad: bool = False           # B is not bad: nothing to search
    lock: str | None = None         # B's lock file, where its pins are one's

    @property
    def found(self) -> bool:
        return self.search is not None and self.search.found

    def probe(self, side: str, changes: Sequence[Change]) -> ProbeRun | None:
        want = frozenset(changes)
        return next((p for p in self.probes if p.side == side
                     and frozenset(p.changes) == want), None)

    @property
    def runs(self) -> int:
        return sum(1 for p in self.probes if p.how == "run")

    def sentence(self) -> str:
        """The answer a user acts on, in one paragraph."""
        g, b = self.good.image.label, self.bad.image.label
        if self.not_bad:
            text = (f"B is not bad: {b} is {cell_text(self.bad)}; culprit needs a bad image "
                    f"and a good one (G {g} is {cell_text(self.good)})")
            if self.probes:
                text += "; swapped anyway: " + "; ".join(
                    f"{'B' if p.side == UNDO else 'G'} with "
                    f"{', '.join(c.undone() if p.side == UNDO else c.applied() for c in p.changes)}"
                    f": {_said(p)} [{p.image}]" for p in self.probes)
            return text
        s = self.search
        assert s is not None
        cost = f"{len(self.probes)} probes ({self.runs} run), {self.seconds:.0f} s."
        if s.found:
            names = ", ".join(str(c) for c in s.answer)
            undo, apply = self.probe(UNDO, s.answer), self.probe(APPLY, s.answer)
            assert undo is not None and apply is not None
            return (f"cause: {names}. B with {', '.join(c.undone() for c in s.answer)}: "
                    f"{_said(undo)}; G with {', '.join(c.applied() for c in s.answer)}: "
                    f"{_said(apply)}.{self.not_apart()} Workaround: "
                    f"{workaround(s.answer, undo.image, self.lock)} {cost}")
        if s.status == OUTSIDE:
            other = "; ".join(f"{w} {gv} -> {bv}" for w, gv, bv in self.diff.other)
            return (f"not the packages: B with every package change undone is still bad "
                    f"({len(self.diff.packages)} undone). What else differs: "
                    f"{other or 'nothing the agent records (the host? run G and B again)'}. "
                    f"{cost}")
        named = ", ".join(str(c) for c in s.answer)
        return (f"no culprit proved ({s.status}): {s.why}"
                + (f"; suspects: {named}" if named else "") + f".{self.not_apart()} {cost}")

    def not_apart(self) -> str:
        """' Not held apart: ...' where the answer's changes were (`held_together`)."""
        if self.search is None or not held_together(self.search):
            return ""
        return (" Not held apart: no hybrid with only some of "
                f"{', '.join(c.name for c in self.search.answer)} could be tested (see "
                "the probes), so which of them did it is not known.")

    def to_dict(self) -> dict[str, object]:
        s = self.search
        return {"row": self.row, "good": self.good.id, "bad": self.bad.id,
                "status": "not-bad" if self.not_bad else (s.status if s else None),
                "answer": [c.to_dict() for c in s.answer] if s else [],
                "sentence": self.sentence(), "difference": self.diff.to_dict(),
                "probes": [p.to_dict() for p in self.probes],
                "seconds": round(self.seconds, 1)}


def _said(p: ProbeRun) -> str:
    return cell_text(p.result) if p.result is not None else p.outcome


def pins_of(packages: Mapping[str, str], changes: Sequence[Change], side: str
            ) -> tuple[str, ...]:
    """The hybrid's requirements: `packages` with each change at the other side's
    version (left out where that side lacks it)."""
    pkgs = {n: v for n, v in packages.items() if n not in TOOLING}
    for c in changes:
        version = c.good if side == UNDO else c.bad
        if version is None:
            pkgs.pop(c.name, None)
        else:
            pkgs[c.name] = version
    return tuple(sorted(f"{n}=={v}" for n, v in pkgs.items()))


def hybrid_image(base: CellResult, cell: Cell, changes: Sequence[Change], side: str
                 ) -> ImageSpec:
    """A local-runtime image of the swapped pins, labelled by a key of its recipe."""
    pins = pins_of(base.fingerprint.packages, changes, side)
    python = cell.image.python or (cell.image.ref if not cell.image.pip else None)
    key = hashlib.sha256("\n".join([python or "", *pins]).encode()).hexdigest()[:10]
    return ImageSpec(label=f"culprit-{key}", ref=cell.image.ref, index=cell.image.index,
                     pip=pins, python=python, hybrid=True)


def outcome_of(result: CellResult, bad: CellResult) -> str:
    """What the search reads from a probe: good where it is free of B's fault (a
    memory fault's absence counts even if step time alone is undecided); bad where it
    shows B's fault (or one attributed the same way); else untestable, since a crash,
    hang or slowdown on a busy host shows neither."""
    if free_of(result, bad.verdict):
        return PROBE_GOOD
    if result.verdict == bad.verdict or (
            result.verdict in BAD and result.verdict not in BROKEN
            and KINDS[result.verdict].attribute == KINDS[bad.verdict].attribute):
        return PROBE_BAD
    return UNTESTABLE


def culprit(g_cell: Cell, good: CellResult, b_cell: Cell, bad: CellResult, runner: Runner,
            say: Say, repeats: int = 1, make: Maker | None = None,
            swap: Sequence[str] = ()) -> CulpritOutcome:
    """Search the changes from G to B for the set that makes B bad.

    Args:
        g_cell, good, b_cell, bad: The row's last good and first bad cells, and their results.
        runner, say: Runs a (hybrid) cell to its final result against G; one line per probe.
        repeats, make: Extra runs of an undecided hybrid; builds a hybrid image (None: venvs).
        swap: Packages swapped as one set, no search (named only if both probes prove it).

    Raises: ValueError: a name in `swap` is not a package change between G and B.
    """
    start = time.monotonic()
    out = CulpritOutcome(b_cell.row, good, bad, difference(good, bad), lock=b_cell.image.lock)
    named = [c for c in out.diff.packages if c.name in swap]
    if len(named) != len(set(swap)):
        lacking = sorted(set(swap) - {c.name for c in named})
        raise ValueError(f"not a package change from {good.image.label} to "
                         f"{bad.image.label}: {', '.join(lacking)} (allowed values: "
                         f"{', '.join(c.name for c in out.diff.packages) or 'none'})")
    # G good as a probe is (`outcome_of`): where B's fault is memory, undecided on its
    # steps alone with its memory stable counts
    if not swap and (bad.verdict not in BAD or not free_of(good, bad.verdict)):
        out.not_bad = bad.verdict not in BAD
        if not out.not_bad:
            out.search = Search("no-fix", why=f"G {good.image.label} is {good.verdict}, not "
                                              "good")
        return out
    own = {pins_key(g_cell, good): (good, "G's sweep cell"),
           pins_key(b_cell, bad): (bad, "B's sweep cell")}

    def probe(side: str, changes: tuple[Change, ...]) -> str:
        base_cell, base = (b_cell, bad) if side == UNDO else (g_cell, good)
        t0 = time.monotonic()
        try:
            image = (make(side, changes) if make is not None
                     else hybrid_image(base, base_cell, changes, side))
        except EnvironmentUnavailable as exc:
            why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            return said(ProbeRun(side, changes, UNTESTABLE, "-", None, f"not built: {why}",
                                 time.monotonic() - t0))
        if make is None and (g_cell.image.hashes or b_cell.image.hashes):
            # lock images: the hybrid's pins installed with their locks' hashes checked
            image = dataclasses.replace(image, hashes=carried(
                image.pip, g_cell.image.hashes, b_cell.image.hashes))
        known = own.get((image.python, image.pip)) if make is None else None
        if known is not None:
            result, how = known
        else:
            cell = dataclasses.replace(b_cell, id=f"{image.label}.{b_cell.row}", image=image)
            result = runner(cell)
            for _ in range(repeats):
                if result.verdict not in UNDECIDED:
                    break
                result = runner(cell)
            how = ("cached" if isinstance(runner, SweepRunner) and result.id in runner.cached
                   else "run")
        name = result.image.label if known else image.ref if make is not None else image.label
        return said(ProbeRun(side, changes, outcome_of(result, bad), name, result, how,
                             time.monotonic() - t0,
                             () if known or result.verdict == "unavailable" or not image.pip
                             else drift_of(image, result)))

    def said(run: ProbeRun) -> str:
        out.probes.append(run)
        say(f"probe {len(out.probes)}: {run.words()}")
        return run.outcome

    if swap:
        out.not_bad = bad.verdict not in BAD
        both = tuple(named)
        undo, apply = probe(UNDO, both), probe(APPLY, both)
        proved = undo == PROBE_GOOD and apply == PROBE_BAD and not out.not_bad
        out.search = Search(FOUND if proved else SWAPPED, both if proved else (),
                            why=f"B with them undone is {undo}, G with them applied is "
                                f"{apply}")
    else:
        out.search = find_culprit(out.diff.packages, probe)
    out.seconds = time.monotonic() - start
    return out


def docker_hybrids(client: Any, g_cell: Cell, b_cell: Cell, progress: Say) -> Maker:
    """Hybrids as container images built offline from B (undo) or G (apply) with the
    packages' files taken from the other image."""
    # lazy: docker-py only where a hybrid image is built on a Docker engine
    from harness.runtimes.dockerengine import hybrid

    def make(side: str, changes: tuple[Change, ...]) -> ImageSpec:
        base, other = ((b_cell.image, g_cell.image) if side == UNDO
                       else (g_cell.image, b_cell.image))
        take = [c.name for c in changes if (c.good if side == UNDO else c.bad) is not None]
        drop = [c.name for c in changes if (c.bad if side == UNDO else c.good) is not None]
        swapped = ", ".join(c.undone() if side == UNDO else c.applied() for c in changes)
        tag = hybrid(client, base, other, take, drop, swapped, progress)
        return ImageSpec(label=f"culprit-{tag.rpartition(':')[2]}", ref=tag,
                         index=b_cell.image.index, python=base.python)

    return make


def pins_key(cell: Cell, result: CellResult) -> tuple[str | None, tuple[str, ...]]:
    """A sweep cell as a hybrid recipe, so a hybrid equal to it is not run again."""
    image = hybrid_image(result, cell, (), UNDO)
    return image.python, image.pip


class SweepRunner:
    """Runs a hybrid through the sweep's stages and compares it with G. A hybrid whose
    latest decided result has the same run key is reused (its id kept in `cached`)."""

    def __init__(self, sweep: Sweep, g_cell: Cell, good: CellResult,
                 g_series: Series | None):
        self.sweep, self.g_cell, self.good = sweep, g_cell, good
        self.cached: set[str] = set()
        self.seen: set[str] = set()
        if g_series is not None:
            sweep.series.keep(g_cell.id, g_series)

    def __call__(self, cell: Cell) -> CellResult:
        sweep = self.sweep
        runs = attempts(sweep.store, cell.id)
        first = cell.id not in self.seen
        self.seen.add(cell.id)
        if runs and first and runs[-1].verdict not in UNDECIDED and why_not_current(
                runs[-1], cell, sweep.runtime_for(cell).name) is None:
            self.cached.add(runs[-1].id)
            return runs[-1]
        return run_attempt(sweep, cell, (self.g_cell, self.good))[0]


sweep_runner = SweepRunner


__all__ = [
    "FOUND",
    "CulpritOutcome",
    "ProbeRun",
    "SweepRunner",
    "culprit",
    "docker_hybrids",
    "hybrid_image",
    "outcome_of",
    "pins_of",
    "sweep_runner",
]
