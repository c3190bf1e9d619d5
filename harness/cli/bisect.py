"""`harness bisect matrix.yaml [--good A --bad B]`: first bad image without a full sweep."""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import matrixfile
from harness.app.sweep import apply_overrides
from harness.cli import answer, interruptible, options, printer
from harness.errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_REGRESSION, InputError
from harness.orchestrator import Sweep, prefetch_analysis
from harness.plans.bisect import bisect, expected_probes, latest, sweep_runner
from harness.preflight import compile_scenarios
from harness.runtimes import Engines
from harness.store import RunStore
from harness.store.gate import why_not_current
from harness.store.runs import BISECT, SWEEP_RESULTS, require

if TYPE_CHECKING:
    from harness.matrixfile.model import Cell, Matrix
    from harness.plans.bisect import BisectOutcome
    from harness.result.model import CellResult


def add_parser(sub: Any) -> None:
    p = sub.add_parser("bisect", help="find the first bad image of one row by bisection")
    p.add_argument("matrix", type=Path, help="matrix YAML file; `image:` order is version order")
    p.add_argument("--scenario", metavar="ID", help="scenario id (needed if several)")
    p.add_argument("--gpu", metavar="G", help="GPU value or label, e.g. 0 or gpu0 (needed "
                                              "if several)")
    p.add_argument("--good", metavar="IMAGE",
                   help="a known-good image (label or reference): bisect from here")
    p.add_argument("--bad", metavar="IMAGE",
                   help="a known-bad image (label or reference): bisect up to here")
    p.add_argument("--repeats", type=int, default=1,
                   help="extra probes of an image whose verdict stays ambiguous (default 1)")
    p.add_argument("--reuse", type=Path, action="append", default=[], metavar="DIR",
                   help="also reuse finished cells of this results directory (repeatable)")
    options.add(p, "out", "runtime", "docker-host", "iterations", "warmup", "quiet",
                out_keeps="the bisect keeps its cells in <out>/<name>/bisect-<row> and "
                          "reuses them on the next run")
    answer.add(p)
    p.set_defaults(func=run)


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


@answer.answers("bisect", {"dir": None, "row": None, "images": [], "found": False,
                           "first_bad": None, "last_good": None, "sentence": "", "step": None,
                           "diff": [], "probes": [], "runs": 0, "reused": 0,
                           "reused_from": {}, "full_sweep": 0})
def run(args: argparse.Namespace) -> int:
    options.check(args)
    if args.repeats < 0:
        raise InputError("--repeats must be >= 0")
    check_reuse(args.reuse)
    matrix = matrixfile.load(args.matrix)
    cells = apply_overrides(between(row_cells(matrix, args.scenario, args.gpu), args.good,
                              args.bad, matrix.file), args.iterations, args.warmup)
    compile_scenarios(cells)
    outcome, cache = bisect_row(args, matrix, cells)
    shown(outcome, cache, len(cells))
    if not outcome.found:
        sweep = f"harness sweep {shlex.quote(str(args.matrix))} -k {outcome.row}"
        print(f"  fix: {outcome.fix(sweep)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_REGRESSION if outcome.first_bad else EXIT_OK


def shown(outcome: BisectOutcome, cache: Reuse, cells: int) -> None:
    """The answer in words: the first bad image, the fingerprint diff, what it cost;
    or in JSON mode the same from the outcome, each probed image's result with it."""
    whence = "; ".join(f"{n} from {where}" for where, n in cache.sources.items())
    if answer.active():
        answer.update(
            dir=str(cache.store.root), row=outcome.row, images=outcome.labels, found=outcome.found,
            first_bad=outcome.first_bad, last_good=outcome.last_good,
            sentence=outcome.sentence(), step=outcome.step,
            diff=[{"what": w, "good": g, "bad": b} for w, g, b in outcome.diff()],
            probes=[answer.cell_ref(r) for _, r in sorted(outcome.results.items())],
            runs=outcome.runs, reused=outcome.reused, reused_from=dict(cache.sources),
            full_sweep=cells)
        return
    print(f"\n{outcome.row}: {outcome.sentence()}")
    for what, good, bad in outcome.diff():
        print(f"  {what}: {good} -> {bad}")
    print(f"{outcome.runs} cell run(s), {outcome.reused} reused"
          + (f" ({whence})" if whence else "")
          + f"; a full sweep of this row is {cells} runs")


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


def bisect_row(args: argparse.Namespace, matrix: Matrix, cells: list[Cell]
               ) -> tuple[BisectOutcome, Reuse]:
    """The row bisected in its own directory (<out>/<name>/bisect-<row>, kept for the
    next bisect of the row), reusing what still answers: the outcome and the cache that
    says where reused results came from."""
    prefetch_analysis()
    engines = Engines.for_matrix(matrix, args.runtime or matrix.runtime, args.docker_host)
    engines.start(cells)
    row = cells[0].row
    # A fixed directory, not a timestamped one: the next bisect of this row reuses it.
    store = RunStore(args.out / matrix.name / f"bisect-{row}")
    store.lock()
    # A closed stdout or stderr stops the probes as Ctrl-C does (harness.signals).
    with interruptible():
        print(f"bisect {row} over {len(cells)} images ({cells[0].image.label} .. "
              f"{cells[-1].image.label}): at most {expected_probes(len(cells))} probes "
              f"without noise; cells in {store.root}", flush=True)
        try:
            sweep = Sweep(matrix, engines.default, store, printer(args.quiet), engines.by_host)
            cache = Reuse(sweep, store, [RunStore(d) for d in args.reuse])
            store.write("matrix.yaml", args.matrix.read_text(encoding="utf-8"))
            store.mark(BISECT, matrix.name, str(args.matrix))
            # A probe's line is progress: -q leaves the range searched, why a kept cell
            # runs again, and the answer (issue 63 item 14).
            outcome = bisect(cells, sweep_runner(sweep, cells),
                             (lambda s: None) if args.quiet else
                             (lambda s: print(s, flush=True)), cache, args.repeats)
        finally:
            try:
                engines.stop()
            finally:
                store.unlock()
    return outcome, cache


class Reuse:
    """The bisect's cache: a cell's result from the row's directory, else from a --reuse
    directory, when the same run made it (its key matches); else None, said why.
    `sources` counts where reused results came from."""

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
