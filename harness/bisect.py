"""`harness bisect`: one row bisected in its own directory, reusing results. The pure
planner's (`answers.search.plan_bisect`) probes run through an injected runner; an image
probed again is a new attempt (`<id>.attempt-<n>`), the latest answering for it.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.analysis.kinds import GOOD
from harness.answers.search import BisectStep, fingerprint_diff, plan_bisect
from harness.app.command import hold
from harness.errors import InputError, interruptible
from harness.matrixfile.model import Cell
from harness.result.model import CellResult
from harness.runtimes import Engines
from harness.stages.orchestrator import Sweep, prefetch_analysis
from harness.store import RunStore
from harness.store.gate import why_not_current
from harness.store.runs import BISECT, SWEEP_RESULTS, require, resumable, shown

if TYPE_CHECKING:
    from harness.matrixfile.model import Matrix
    from harness.protocol.series import Series


Runner = Callable[[Cell], CellResult]
Cache = Callable[[Cell], "CellResult | None"]
Say = Callable[[str], None]


@dataclass
class BisectOutcome:
    """How a bisect ended, with every result it looked at (by image index)."""

    row: str
    labels: list[str]
    step: BisectStep
    results: dict[int, CellResult] = field(default_factory=dict)
    runs: int = 0           # runtime invocations, repeats inside run_cell included
    probes: int = 0         # calls of the runner
    reused: int = 0         # results taken from disk instead of run

    @property
    def found(self) -> bool:
        return self.step.action == "found"

    @property
    def first_bad(self) -> str | None:
        return self.labels[self.step.hi] if self.found and self.step.hi is not None else None

    @property
    def last_good(self) -> str | None:
        return self.labels[self.step.lo] if self.found and self.step.lo is not None else None

    def diff(self) -> list[tuple[str, str, str]]:
        """Fingerprint differences between the last good and the first bad image."""
        if not self.found or self.step.lo is None or self.step.hi is None:
            return []
        return fingerprint_diff(self.results[self.step.lo], self.results[self.step.hi])

    def sentence(self) -> str:
        """One line: the answer, or why the bisect stopped."""
        if self.found:
            text = f"first bad: {self.first_bad} (last good: {self.last_good})"
            if self.step.skipped:
                names = ", ".join(self.labels[i] for i in self.step.skipped)
                text += f"; undecided images in between: {names} (the first bad may be one)"
            return text
        assert self.step.index is not None
        label = self.labels[self.step.index]
        res = self.results.get(self.step.index)
        which = "first" if self.step.index == 0 else "last"
        want = "good" if self.step.index == 0 else "bad"
        said = f"{res.verdict} ({res.reason})" if res is not None else "? ()"
        if self.no_bad_end:
            # None bad as far as the ends show; the images between were never run.
            first, between = self.labels[0], len(self.labels) - 2
            if not between:
                return (f"no bad image: the last image {label} is {said} and the first "
                        f"({first}) good, with no image between them")
            return (f"no bad image: the last image {label} is {said}; bisect searches back "
                    f"from a bad last image, so the {between} image(s) between {first} and "
                    f"{label} were not run (a regression that {label} fixed would be there)")
        return f"stopped: the {which} image {label} is {said}, but bisect needs it {want}"

    @property
    def undecided_end(self) -> bool:
        """Stopped because an endpoint stayed undecided (`ambiguous` in every probe)."""
        return not self.found and self.step.why.startswith("endpoint stayed undecided")

    @property
    def no_bad_end(self) -> bool:
        """Stopped because the last image, the bad end, ran good."""
        i = self.step.index
        res = self.results.get(i) if i is not None else None
        return (not self.found and i == len(self.labels) - 1 and i > 0 and res is not None
                and res.verdict in GOOD)

    def fix(self, sweep: str) -> str:
        """What to do where no first bad was found; `sweep` sweeps the row whole."""
        if self.no_bad_end:
            return (f"pass --bad an image that is bad when run; `{sweep}` runs every image "
                    "of the row, and its first bad is the one to pass")
        if self.step.why.startswith("endpoint is"):
            return "bisect between a known-good and a known-bad image: --good IMAGE --bad IMAGE"
        return ("raise iterations (--iterations), or `rounds:` where its confirmation "
                "rounds left it unsettled, or run on a quieter host, so the endpoint's "
                "verdict is decided")


def expected_probes(n: int) -> int:
    """Probes a noise-free bisect needs at most: two endpoints, then halving."""
    return 2 + math.ceil(math.log2(n - 1)) if n > 2 else n


def bisect(cells: Sequence[Cell], runner: Runner, say: Say, cache: Cache | None = None,
           repeats: int = 1) -> BisectOutcome:
    """Find the first bad image among `cells` (one row, in image order).

    Args:
        runner, say: Runs a cell to its final result; gets one line per step.
        cache, repeats: A cell's finished result or None, asked first; extra undecided probes.

    Raises: ValueError: fewer than two cells, or cells of more than one row.
    """
    if len({c.row for c in cells}) > 1:
        raise ValueError(f"bisect one row at a time, got {sorted({c.row for c in cells})}")
    labels = [c.image.label for c in cells]
    observed: dict[int, list[str]] = {}
    out = BisectOutcome(cells[0].row if cells else "", labels, BisectStep("stop", None, None,
                                                                             None))
    while True:
        step = plan_bisect(len(cells), observed, repeats)
        out.step = step
        if step.action != "probe":
            break
        assert step.index is not None
        i = step.index
        cell = cells[i]
        result = cache(cell) if cache is not None and i not in observed else None
        how = "cached"
        if result is None:
            result = runner(cell)
            out.probes += 1
            out.runs += max(1, len(result.attempts))
            how = f"run {out.probes}"
        else:
            out.reused += 1
        out.results[i] = result
        observed.setdefault(i, []).append(result.verdict)
        say(_describe(step, labels, result, how, plan_bisect(len(cells), observed, repeats)))
    return out


def _describe(step: BisectStep, labels: list[str], result: CellResult, how: str,
              after: BisectStep) -> str:
    assert step.index is not None
    kind = "endpoint" if step.lo is None else "probe"
    head = (f"{kind} {labels[step.index]} [{step.index + 1}/{len(labels)}, {how}]: "
            f"{result.verdict} ({result.reason})")
    if after.action == "found":
        assert after.hi is not None and after.lo is not None
        return f"{head} -> first bad is {labels[after.hi]} (last good {labels[after.lo]})"
    if after.action == "stop":
        return f"{head} -> stop: {after.why}"
    if after.lo is None:
        if after.index == step.index:
            return f"{head} -> undecided, probing it again"
        return f"{head} -> good, as the first image must be; now the last image"
    assert after.hi is not None
    left = after.hi - after.lo - 1 - len(after.skipped)
    tail = f" (again: {after.why})" if after.why else ""
    return (f"{head} -> first bad is in {labels[after.lo + 1]}..{labels[after.hi]} "
            f"({left} untested){tail}")


def attempt_id(cell_id: str, n: int) -> str:
    """The id of a cell's n-th run (the first keeps the cell's own id)."""
    return cell_id if n == 1 else f"{cell_id}.attempt-{n}"


def attempts(store: RunStore, cell_id: str) -> list[CellResult]:
    """The cell's results in the store, one per run, the first run's first."""
    found: list[CellResult] = []
    n = 1
    while (result := store.load_cell(attempt_id(cell_id, n))) is not None:
        found.append(result)
        n += 1
    return found


def latest(store: RunStore, cell_id: str) -> CellResult | None:
    """The result of the cell's latest run in the store, or None."""
    found = attempts(store, cell_id)
    return found[-1] if found else None


def run_attempt(sweep: Sweep, cell: Cell, against: tuple[Cell, CellResult] | None
                ) -> tuple[CellResult, Series]:
    """Run `cell` as its next attempt, compared with `against`, and written once."""
    runs = attempts(sweep.store, cell.id)
    this = cell if not runs else dataclasses.replace(
        cell, id=attempt_id(cell.id, len(runs) + 1))
    measured = sweep.run_cell(this)
    result = measured.result if against is None else sweep.compare(this, measured, *against)
    sweep.store.write_cell(result)
    return result, measured.series


def sweep_runner(sweep: Sweep, cells: Sequence[Cell]) -> Runner:
    """A runner that compares each probe with the first image, as a full sweep does."""
    first = cells[0]
    done: dict[str, CellResult] = {}

    def run(cell: Cell) -> CellResult:
        if first.id not in done:
            # The first endpoint may have come from the cache: read it from the store.
            cached = attempts(sweep.store, first.id)
            if cached:
                done[first.id] = cached[-1]
                series = sweep.series(cached[-1].id)
                if series is not None:
                    sweep.series.keep(first.id, series)
        against = (first, done[first.id]) if cell.id != first.id and first.id in done \
            else None
        result, series = run_attempt(sweep, cell, against)
        sweep.series.keep(cell.id, series)
        done[cell.id] = result
        return result

    return run


def pick(values: list[str], wanted: str | None, flag: str, source: Path) -> str:
    """The one value the flag names (or the only one there is).

    Raises:
        InputError: the flag is missing while there is a choice, or names nothing.
    """
    if wanted is None:
        if len(values) == 1:
            return values[0]
        raise InputError(f"{source}: the matrix has several {flag[2:]}s; pass {flag} "
                         f"(allowed values: {', '.join(values)})")
    if wanted not in values:
        raise InputError(f"{flag} {wanted}: not in {source} (allowed values: "
                         f"{', '.join(values)})")
    return wanted



def row_cells(matrix: Matrix, scenario: str | None, gpu: str | None) -> list[Cell]:
    """The cells of one row, in image order.

    Raises:
        InputError: unknown scenario or GPU, or fewer than two images in the row.
    """
    sid = pick(sorted({s.id for s in matrix.scenarios}), scenario, "--scenario", matrix.file)
    labels = {g.label: g.value for g in matrix.gpus}
    if gpu is not None and gpu in labels.values() and gpu not in labels:
        gpu = next(k for k, v in labels.items() if v == gpu)
    glabel = pick(sorted(labels), gpu, "--gpu", matrix.file)
    cells = sorted((c for c in matrix.cells if c.scenario.id == sid and c.gpu.label == glabel),
                   key=lambda c: c.image.index)
    if len(cells) < 2:
        raise InputError(f"{matrix.file}: row {glabel}.{sid} has {len(cells)} image(s); "
                         "bisect needs at least two (check `exclude:`)")
    return cells



def between(cells: list[Cell], good: str | None, bad: str | None, source: Path) -> list[Cell]:
    """The row's cells from --good to --bad (inclusive), in image order.

    Raises:
        InputError: an image that is not in the row, --bad not after --good.
    """
    def index(name: str, flag: str) -> int:
        for i, c in enumerate(cells):
            if name in (c.image.label, c.image.ref):
                return i
        raise InputError(f"{flag} {name}: not an image of {source} (allowed values: "
                         f"{', '.join(c.image.label for c in cells)})")

    lo = index(good, "--good") if good is not None else 0
    hi = index(bad, "--bad") if bad is not None else len(cells) - 1
    if hi <= lo:
        raise InputError(f"--bad {cells[hi].image.label} is not after --good "
                         f"{cells[lo].image.label} in {source}: `image:` order is version "
                         "order, the good one comes first")
    return cells[lo:hi + 1]



def check_reuse(dirs: list[Path]) -> None:
    """Each --reuse directory: a sweep's (or a bisect's) results.

    Raises:
        InputError: no cells/ there, or results of another kind.
    """
    for d in dirs:
        if not (d / "cells").is_dir():
            raise InputError(f"--reuse {d}: no cells/ directory here; pass a directory "
                             "written by `harness sweep`")
        require(d, (*SWEEP_RESULTS, BISECT), "harness bisect", "--reuse")


@dataclass(frozen=True)
class BisectOptions:
    """What a bisect is asked, as `harness bisect`'s flags say it."""

    matrix: Path
    out: Path = Path("reports")
    runtime: str | None = None
    docker_host: str | None = None
    quiet: bool = False
    repeats: int = 1
    reuse: tuple[Path, ...] = ()


def bisect_row(asked: BisectOptions, matrix: Matrix, cells: list[Cell],
               progress: Callable[[str], None]) -> tuple[BisectOutcome, Reuse]:
    """Bisect the row in its own kept directory; the outcome and the cache."""
    hold(prefetch_analysis())
    engines = Engines.for_matrix(matrix, asked.runtime or matrix.runtime, asked.docker_host)
    engines.start(cells)
    row = cells[0].row
    # A fixed directory, so the next bisect of this row reuses it.
    store = RunStore(asked.out / matrix.name / f"bisect-{row}")
    store.lock()
    # A closed stdout or stderr stops the probes as Ctrl-C does (harness.errors).
    with interruptible():
        print(f"bisect {row} over {len(cells)} images ({cells[0].image.label} .. "
              f"{cells[-1].image.label}): at most {expected_probes(len(cells))} probes "
              f"without noise; cells in {store.root}", flush=True)
        with engines.stopped(store.unlock):
            sweep = Sweep(matrix, engines.default, store, progress, engines.by_host)
            dirs = list(asked.reuse)
            swept = resumable(asked.out / matrix.name, matrix.name, asked.matrix)
            if swept is not None and not any(d.resolve() == swept.resolve() for d in dirs):
                # the newest sweep's cells whose keys still hold answer probes
                dirs.insert(0, swept)
                print(f"reusing the finished cells of the newest sweep of "
                      f"{asked.matrix.name} whose run keys hold: {shown(swept)} (--reuse DIR "
                      "adds another)", flush=True)
            cache = Reuse(sweep, store, [RunStore(d) for d in dirs])
            store.write("matrix.yaml", asked.matrix.read_text(encoding="utf-8"))
            store.mark(BISECT, matrix.name, str(asked.matrix))
            # A probe's line is progress, which -q leaves out.
            outcome = bisect(cells, sweep_runner(sweep, cells),
                             (lambda s: None) if asked.quiet else
                             (lambda s: print(s, flush=True)), cache, asked.repeats)
    return outcome, cache



class Reuse:
    """The bisect's cache: a stored result whose run key matches, else None, said why."""

    def __init__(self, sweep: Sweep, store: RunStore, others: list[RunStore]):
        self.sweep = sweep
        self.store = store
        self.others = others
        self.sources: dict[str, int] = {}

    def __call__(self, cell: Cell) -> CellResult | None:
        runtime = self.sweep.runtime_for(cell).name
        found = latest(self.store, cell.id)
        if found is not None:
            why = why_not_current(found, cell, runtime)
            if why is None:
                self._count(self.store)
                return found
            print(f"{cell.image.label}: {why}; running it again", flush=True)
        for other in self.others:
            got = other.load_cell(cell.id)
            if got is None:
                continue
            why = why_not_current(got, cell, runtime)
            if why is not None:
                print(f"{cell.image.label}: not reused from {other.root}: {why}", flush=True)
                continue
            if found is not None:   # its runs here stand: a new run is their next attempt
                continue
            # Samples too: comparisons with the first image read them.
            shutil.copytree(other.root / "cells" / cell.id,
                            self.store.root / "cells" / cell.id, dirs_exist_ok=True)
            self._count(other)
            return got
        return None

    def _count(self, where: RunStore) -> None:
        self.sources[str(where.root)] = self.sources.get(str(where.root), 0) + 1
