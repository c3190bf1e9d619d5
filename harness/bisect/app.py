"""`harness bisect` once parsed: one row bisected in its own directory, reusing results."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.app.command import hold
from harness.bisect.plan import bisect, expected_probes, latest, sweep_runner
from harness.errors import InputError
from harness.runtimes import Engines
from harness.signals import interruptible
from harness.stages.orchestrator import Sweep, prefetch_analysis
from harness.store import RunStore
from harness.store.gate import why_not_current
from harness.store.runs import BISECT, SWEEP_RESULTS, require, resumable, shown

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness.bisect.plan import BisectOutcome
    from harness.matrixfile.model import Cell, Matrix
    from harness.result.model import CellResult


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
    # A closed stdout or stderr stops the probes as Ctrl-C does (harness.signals).
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
