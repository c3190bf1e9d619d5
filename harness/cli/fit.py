"""`harness fit matrix.yaml --param batch=1..64`: the largest value that runs, per row."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import matrixfile
from harness.app.sweep import apply_overrides
from harness.cli import answer, interruptible, options, printer
from harness.errors import EXIT_ENVIRONMENT, EXIT_OK, EXIT_REGRESSION, InputError
from harness.fit.page import FitReport
from harness.fit.plan import Target, fit_row, store_cache, sweep_runner
from harness.fit.steps import probe_bound
from harness.matrixfile.fitblock import RANGE_FIX, check_param, parse_range
from harness.orchestrator import Sweep, prefetch_analysis
from harness.preflight import compile_scenarios
from harness.runtimes import Engines
from harness.store import RunStore
from harness.store.runs import FIT

if TYPE_CHECKING:
    from harness.fit.plan import FitRow
    from harness.matrixfile.model import Cell, Matrix


def add_parser(sub: Any) -> None:
    p = sub.add_parser("fit", help="largest value of an integer param that runs, per row")
    p.add_argument("matrix", type=Path, help="matrix YAML file")
    p.add_argument("--param", metavar="NAME=LO..HI",
                   help="the integer scenario param and its range, e.g. batch=1..64 "
                        "(default: the matrix's `fit:` block)")
    p.add_argument("-k", dest="select", metavar="EXPR",
                   help="only the rows (cells) whose id matches, as in `harness sweep -k`")
    options.add(p, "out", "runtime", "docker-host", "iterations", "warmup", "quiet",
                per="probe", out_keeps="probes are kept in <out>/<name>/fit-<param> and "
                                       "reused on the next run")
    answer.add(p)
    p.set_defaults(func=run)


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


@answer.answers("fit", {"dir": None, "param": None, "range": [], "bound": None, "rows": [],
                        "first_smaller": []})
def run(args: argparse.Namespace) -> int:
    options.check(args)
    matrix = matrixfile.load(args.matrix)
    target = target_of(matrix, args.param)
    cells = apply_overrides(matrixfile.select(matrix.cells, args.select), args.iterations,
                            args.warmup, getattr(args, "budget", None))
    compile_scenarios(cells)
    rows, store = fit_rows(args, matrix, cells, target)
    report = FitReport.from_rows(rows)
    for name, text in report.files().items():
        store.write(name, text)
    shown(report, store)
    if report.smaller:
        return EXIT_REGRESSION
    if any(r.step.action == "stop" and r.step.why.startswith("unavailable") for r in rows):
        return EXIT_ENVIRONMENT
    return EXIT_OK


def shown(report: FitReport, store: RunStore) -> None:
    """The boundaries in words, or in JSON mode fit.json's document (`FitReport.to_json`)
    with the directory it is in."""
    if answer.active():
        answer.update(dir=str(store.root), **report.to_json())
        return
    print()
    print(report.console())
    reused = sum(r.reused for r in report.rows)
    if reused:
        print(f"\n{reused} probe(s) reused from {store.root}, "
              f"{sum(r.runs for r in report.rows)} run")
    print(f"\nresults: {store.root} (fit.md, fit.json, fit.html)")


def fit_rows(args: argparse.Namespace, matrix: Matrix, cells: list[Cell], target: Target
             ) -> tuple[list[FitRow], RunStore]:
    """Each row's largest value that runs, probed in the fit's own directory
    (<out>/<name>/fit-<param>: the next fit of this matrix and param reuses its probes)."""
    prefetch_analysis()
    engines = Engines.for_matrix(matrix, args.runtime or matrix.runtime, args.docker_host)
    engines.start(cells)
    store = RunStore(args.out / matrix.name / f"fit-{target.param}")
    store.lock()
    # A closed stdout or stderr stops the probes as Ctrl-C does (harness.signals).
    with interruptible():
        print(f"fit {target.param} in {target.lo}..{target.hi} over {len(cells)} row(s): at most "
              f"{_bound(target)} probes per row; cells in {store.root}", flush=True)
        rows = []
        try:
            sweep = Sweep(matrix, engines.default, store, printer(args.quiet), engines.by_host)
            store.write("matrix.yaml", args.matrix.read_text(encoding="utf-8"))
            store.mark(FIT, matrix.name, str(args.matrix))
            runner = sweep_runner(sweep)
            cache = store_cache(sweep, lambda s: print(s, flush=True))
            for cell in cells:
                rows.append(fit_row(cell, target, runner, lambda s: print(s, flush=True), cache))
        finally:
            try:
                engines.stop()
            finally:
                store.unlock()
    return rows, store


def _bound(target: Target) -> int:
    return probe_bound(target.lo, target.hi)
