"""`harness fit`'s work: the param and range, each row's largest value that runs probed
in the fit's own directory (`plan.fit_row`), fit.md, fit.json and fit.html written, and
the exit code; `cli.fit` parses and prints the answer (`page.FitReport`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness import matrixfile
from harness.app.command import hold, printer
from harness.app.sweepoptions import apply_overrides
from harness.errors import EXIT_ENVIRONMENT, EXIT_OK, EXIT_REGRESSION, InputError
from harness.fit.page import FitReport
from harness.fit.plan import Target, fit_row, store_cache, sweep_runner
from harness.fit.steps import probe_bound
from harness.matrixfile.load import RANGE_FIX, check_param, parse_range
from harness.orchestrator import Sweep, prefetch_analysis
from harness.preflight import compile_scenarios
from harness.runtimes import Engines
from harness.signals import interruptible
from harness.store import RunStore
from harness.store.runs import FIT

if TYPE_CHECKING:
    from harness.fit.plan import FitRow
    from harness.matrixfile.model import Cell, Matrix


@dataclass(frozen=True)
class FitAsked:
    """What `harness fit` is asked (its flags).

    Attributes:
        matrix: The matrix file.
        param: NAME=LO..HI (default: the matrix's `fit:` block).
        select: Only the rows whose id matches (`-k`).
        out: The reports folder: probes go to OUT/NAME/fit-PARAM/, reused there.
        runtime, docker_host: Another runtime than the matrix's, and its engine.
        iterations, warmup, budget: Each probe's lengths.
        quiet: No progress lines.
    """

    matrix: Path
    param: str | None = None
    select: str | None = None
    out: Path = Path("reports")
    runtime: str | None = None
    docker_host: str | None = None
    iterations: int | None = None
    warmup: int | None = None
    budget: str | float | None = None
    quiet: bool = False


def fit_command(asked: FitAsked) -> tuple[int, FitReport, Path]:
    """Each selected row's largest value that runs, its files written in the fit's
    directory: the exit code, the answer and that directory (<out>/<name>/fit-<param>).

    Raises:
        InputError: nothing to fit, a malformed --param, a scenario that does not compile.
    """
    matrix = matrixfile.load(asked.matrix)
    target = target_of(matrix, asked.param)
    cells = apply_overrides(matrixfile.select(matrix.cells, asked.select), asked.iterations,
                            asked.warmup, asked.budget)
    compile_scenarios(cells)
    rows, store = fit_rows(asked, matrix, cells, target)
    report = FitReport.from_rows(rows)
    for name, text in report.files().items():
        store.write(name, text)
    if report.smaller:
        code = EXIT_REGRESSION
    elif any(r.step.action == "stop" and r.step.why.startswith("unavailable") for r in rows):
        code = EXIT_ENVIRONMENT
    else:
        code = EXIT_OK
    return code, report, store.root


def target_of(matrix: Matrix, given: str | None) -> Target:
    """The param and range: `--param`, else the matrix's `fit:` block.

    Raises:
        InputError: neither is given, or `--param` is malformed.
    """
    if given is None:
        if matrix.fit is None:
            raise InputError(f"{matrix.file}: nothing to fit; pass --param NAME=LO..HI (e.g. "
                             "--param batch=1..64) or add `fit: {param: batch, range: 1..64}` "
                             "to the matrix")
        return Target(matrix.fit.param, matrix.fit.lo, matrix.fit.hi)
    name, eq, text = given.partition("=")
    bounds = parse_range(text)
    if not eq or bounds is None:
        raise InputError(f"--param {given}: expected NAME=LO..HI; {RANGE_FIX}")
    problem = check_param(name.strip(), matrix.scenarios)
    if problem is not None:
        raise InputError(f"--param {given}: {problem} (in {matrix.file})")
    return Target(name.strip(), bounds[0], bounds[1])


def fit_rows(asked: FitAsked, matrix: Matrix, cells: list[Cell], target: Target
             ) -> tuple[list[FitRow], RunStore]:
    """Each row's largest value that runs, probed in the fit's own directory
    (<out>/<name>/fit-<param>: the next fit of this matrix and param reuses its probes)."""
    hold(prefetch_analysis())
    engines = Engines.for_matrix(matrix, asked.runtime or matrix.runtime, asked.docker_host)
    engines.start(cells)
    store = RunStore(asked.out / matrix.name / f"fit-{target.param}")
    store.lock()
    # A closed stdout or stderr stops the probes as Ctrl-C does (harness.signals).
    with interruptible():
        print(f"fit {target.param} in {target.lo}..{target.hi} over {len(cells)} row(s): at most "
              f"{_bound(target)} probes per row; cells in {store.root}", flush=True)
        rows = []
        with engines.stopped(store.unlock):
            sweep = Sweep(matrix, engines.default, store, printer(asked.quiet), engines.by_host)
            store.write("matrix.yaml", asked.matrix.read_text(encoding="utf-8"))
            store.mark(FIT, matrix.name, str(asked.matrix))
            runner = sweep_runner(sweep)
            cache = store_cache(sweep, lambda s: print(s, flush=True))
            for cell in cells:
                rows.append(fit_row(cell, target, runner, lambda s: print(s, flush=True), cache))
    return rows, store


def _bound(target: Target) -> int:
    return probe_bound(target.lo, target.hi)
