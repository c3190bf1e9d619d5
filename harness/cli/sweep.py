"""`harness sweep matrix.yaml`: run every cell, decide verdicts, name the first bad."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import matrixfile
from harness import report as reports
from harness.answers.journey import results_json
from harness.cli import answer, between, interruptible, options, printer
from harness.cli.helptext import FittedHelpFormatter
from harness.errors import (
    EXIT_BAD_INPUT,
    EXIT_ENVIRONMENT,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_UNDECIDED,
    InputError,
)
from harness.matrixfile.entries import parse_duration
from harness.matrixfile.model import BUDGET_CAP
from harness.orchestrator import Sweep, prefetch_analysis
from harness.preflight import check_lengths, compile_scenarios, floor_caps
from harness.report.grid import console_width, say
from harness.report.live import progress_for
from harness.result.model import Planned
from harness.runtimes import Engines
from harness.store import RunStore
from harness.store.gate import kept_plan
from harness.store.runs import SWEEP, begun_of
from harness.store.runs import shown as path_shown

if TYPE_CHECKING:
    from harness.matrixfile.model import Cell, Matrix
    from harness.orchestrator import SweepOutcome
    from harness.report import Report
    from harness.result.codec import JSON


SWEEP_EPILOG = """examples:
  harness sweep examples/multidict.yaml              the demo: a real leak, no Docker
  harness sweep matrix.yaml -k "gpu0 and rfft"        only the cells matching
  harness sweep matrix.yaml --resume                  finish an interrupted sweep
  harness sweep matrix.yaml --iterations 500 -q       every cell shorter, no progress
  harness sweep matrix.yaml --explain                 then: where the first bad leaks or slows
  harness sweep matrix.yaml --find-cause              then the whole journey: call site,
                                                      package, first fixed image, host
  harness sweep --between old.txt new.txt --scenario step.py
                                                      two lock files; where new is bad,
                                                      the package change that did it

exit codes:
  0  every cell ran and none is bad
  1  a cell is bad (leak, slowdown, regression, oom, timeout, crash)
  2  bad input (matrix, flag, scenario that does not compile, that the agent cannot
     call as written, or that fails on every image; a timeout on every image: a run
     too short for the scenario)
  3  environment unavailable (no engine or GPU; an image or pin could not be had)
  4  no cell bad, but not a complete answer: cells undecided or missing
  130 interrupted: Ctrl-C, or stdout/stderr closed while cells run (finished cells
      are kept; --resume continues)
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "sweep", help="run a matrix of images x GPUs x scenarios",
        formatter_class=FittedHelpFormatter, epilog=SWEEP_EPILOG)
    p.add_argument("matrix", type=Path, nargs="?",
                   help="matrix YAML file (with --between: optional, its scenarios)")
    options.add(p, "width")
    p.add_argument("--details", action="store_true",
                   help="every cell in full words below the table (by default only the "
                        "bad, suspected and undecided ones, where cells are a grid)")
    p.add_argument("-k", dest="select", metavar="EXPR",
                   help="only cells whose id matches EXPR (substrings, and/or/not)")
    p.add_argument("--resume", nargs="?", const=True, default=False, metavar="DIR",
                   help="continue the newest results directory (of --out, or of the "
                        "given reports/NAME), or the given one")
    options.add(p, "out", "runtime", "docker-host", "iterations", "warmup")
    p.add_argument("--explain", action="store_true",
                   help="then run each row's first bad cell and its last good cell again "
                        "with attribution: where it leaks or slows (harness explain)")
    p.add_argument("--find-cause", action="store_true",
                   help="then, for each bad row: where it leaks or slows (harness explain), "
                        "the package change that did it, proved both ways (harness "
                        "culprit), the first fixed image and, on `hosts:`, whether the host "
                        "or the image changed the verdict; one summary per row (with "
                        "--resume, finished steps are reused)")
    p.add_argument("--budget", metavar="SECONDS",
                   help="override every cell's time budget (e.g. 20s, 2m): early-stop "
                        "mode, max_iterations the cap (set: as it is; else 1,000,000)")
    p.add_argument("--list", action="store_true", help="print the cell ids and exit")
    between.add(p)
    options.add(p, "quiet")
    answer.add(p)
    p.set_defaults(func=run)


def apply_overrides(cells: list[Cell], args: argparse.Namespace) -> list[Cell]:
    """--iterations, --warmup and --budget over every cell.

    Raises:
        InputError: a --budget that is not a duration.
    """
    changes = {
        k: v for k, v in (("iterations", args.iterations), ("warmup", args.warmup))
        if v is not None}
    if getattr(args, "budget", None) is not None:
        seconds = parse_duration(args.budget)
        if seconds is None:
            raise InputError(f"--budget {args.budget}: not a duration; write e.g. 20s, 2m "
                             "or 30")
        cells = [dataclasses.replace(c, scenario=dataclasses.replace(
            c.scenario, settings=dataclasses.replace(
                c.settings, budget=seconds,
                max_iterations=c.settings.max_iterations or BUDGET_CAP)))
            for c in cells]
    if not changes:
        return cells
    out = []
    for c in cells:
        settings = dataclasses.replace(c.settings, **changes)
        if args.iterations is not None and settings.max_iterations is not None:
            # Early-stop mode runs up to max_iterations: that is the length asked for.
            settings = dataclasses.replace(
                settings, max_iterations=args.iterations,
                min_iterations=min(settings.min_iterations, args.iterations))
        out.append(dataclasses.replace(c, scenario=dataclasses.replace(c.scenario,
                                                                       settings=settings)))
    return out


@answer.answers("sweep", {"dir": None, "files": [], "name": None, "cells": [], "images": [],
                          "rows": [], "bad_cells": [], "missing_cells": [],
                          "undecided_cells": [], "causes": {}})
def run(args: argparse.Namespace) -> int:
    options.check(args)
    if args.between is not None or args.scenario or args.python:
        args.matrix = between.matrix_file(args, printer(args.quiet))
    elif args.matrix is None:
        raise InputError(f"no matrix file: harness sweep MATRIX, or {between.USAGE}")
    matrix = matrixfile.load(args.matrix)
    cells = apply_overrides(matrixfile.select(matrix.cells, args.select), args)
    answer.update(name=matrix.name, cells=[c.id for c in cells])
    if args.list:
        for c in cells if not answer.active() else ():
            print(c.id)
        return EXIT_OK
    cells = preflight(cells, matrix, args.iterations)
    report, root, paths = sweep_and_report(args, matrix, cells)
    shown(args, report, (root, paths), cells)
    return exit_code(report)


def shown(args: argparse.Namespace, report: Report, written: tuple[Path, list[Path]],
          cells: list[Cell]) -> None:
    """The sweep's table, where its results are and the note of an answer that is not
    whole; or in JSON mode the same from the report model: the rows' answers
    (`RowAnswer`s), the bad, missing and undecided cells and, with --find-cause, each
    row's cause (as results.json keeps them)."""
    root, paths = written
    note = report.incomplete_note()
    if note is not None and exit_code(report) == EXIT_UNDECIDED:
        note = f"{note}: {how_to_decide(report, args.matrix, root, cells)}; exit {EXIT_UNDECIDED}"
    if answer.active():
        answer.note(note or "")
        answer.update(dir=str(root), files=[p.name for p in paths], images=report.images,
                      rows=report.rows, bad_cells=report.bad_cells,
                      missing_cells=report.missing_cells,
                      undecided_cells=report.undecided_cells,
                      causes=results_json(report.causes))
        return
    reports.ConsoleReporter.from_results(report).render(sys.stdout, width=args.width,
                                                        details=args.details)
    width = console_width(sys.stdout, args.width)
    say(sys.stdout, f"\nresults: {root} ({', '.join(p.name for p in paths)})", width)
    if note is not None:
        say(sys.stdout, note, width)


def preflight(cells: list[Cell], matrix: Matrix, iterations: int | None) -> list[Cell]:
    """Before any container: a scenario's syntax error is exit 2 with file:line; a run
    too short to ever decide is refused where --iterations asked for it (`iterations`),
    else said (a smoke or OOM run is the author's choice); an --iterations that can
    decide but needs longer is raised for a run with a time budget (its cap), and said.
    Returns the cells as they will run.

    Raises:
        InputError: a scenario that does not compile, or a refused length.
    """
    compile_scenarios(cells)
    for warning in check_lengths(cells, matrix.analysis, refuse=iterations is not None):
        print(f"harness: {warning}", file=sys.stderr)
    if iterations is not None:
        cells, raised = floor_caps(cells, matrix.analysis, iterations)
        if raised is not None:
            print(f"harness: {raised}", file=sys.stderr)
    return cells


def sweep_and_report(args: argparse.Namespace, matrix: Matrix, cells: list[Cell]
                     ) -> tuple[Report, Path, list[Path]]:
    """The cells swept (then explained, with --explain) and every report file written:
    the report model, the results directory and the files written there.

    Raises:
        EngineUnavailable: no engine or GPU (exit 3, before a results directory exists).
    """
    engines = Engines.for_matrix(matrix, args.runtime or matrix.runtime, args.docker_host)
    runtime = engines.default
    resume: bool | Path = Path(args.resume) if isinstance(args.resume, str) else args.resume
    started = time.time()
    progress = printer(args.quiet)
    # no engine / no GPU: exit 3 before any results directory exists
    engines.start(cells, progress)
    with interruptible():
        store = RunStore.open(args.out, matrix.name, resume, args.matrix, started)
        # Imports NumPy and the reporters while the first cell runs; after every other
        # import of this command, so the two threads never import the same modules at once.
        prefetch = prefetch_analysis(*REPORTERS, then=compile_report_template)
        try:
            store.write("matrix.yaml", args.matrix.read_text(encoding="utf-8"))
            planned = plan_of(cells)
            # Absolute: explain and report find it from any directory.
            # A resumed run keeps its first start (its directory's name) and says when
            # it was continued.
            store.mark(SWEEP, matrix.name, str(args.matrix.resolve()),
                       kept_plan(store.root, matrix, planned) if resume else planned,
                       begun_of(store.root) if resume else started,
                       started if resume else None)
            progress(f"{len(cells)} cell{'' if len(cells) == 1 else 's'}, runtime "
                     f"{runtime.name}, results in {store.root}")
            live = progress_for(args.quiet, store.samples_path)
            try:
                outcome = Sweep(matrix, runtime, store, live, engines.by_host).run(
                    cells, bool(resume))
                if args.between is not None or args.explain or args.find_cause:
                    # lazy: the plans only an option runs load after the cells ran
                    from harness.cli import sweepend

                    if args.between is not None and not args.find_cause:  # --find-cause does it
                        sweepend.culprit_after(matrix, runtime, engines.by_host, store.root,
                                               live, outcome.results, planned, cells)
                    if args.explain or args.find_cause:   # their answers go into the reports
                        # --find-cause's steps go to the sweep's own display (its lines above)
                        sweepend.after_sweep(args, matrix, engines, store,
                                             live if args.find_cause else progress,
                                             outcome.results, planned)
            finally:
                live.close()
            prefetch.join()   # the reporters were imported while the cells ran
            report, paths = reported(outcome, planned, store, {
                "matrix": str(args.matrix), "runtime": runtime.name, "started": started,
                "baseline": matrix.baseline}, matrix.name)
        finally:
            try:
                engines.stop()
            finally:
                store.unlock()
    return report, store.root, paths


def reported(outcome: SweepOutcome, planned: tuple[Planned, ...], store: RunStore,
             meta: dict[str, JSON], name: str) -> tuple[Report, list[Path]]:
    """The sweep's report model (its meta: `meta` and how the cells went), every report
    file written into the results directory."""
    report = reports.Report.from_results(name, outcome.results, {
        **meta, "seconds": round(outcome.seconds, 3), "ran": outcome.ran,
        "reused": outcome.reused}, store.root, outcome.series, planned)
    return report, reports.write_all(store, report)


def how_to_decide(report: Report, matrix: Path, root: Path, cells: Sequence[Cell]) -> str:
    """The command that decides what is not decided: missing cells are run by --resume
    (it reuses every finished one); undecided cells, whose results --resume would
    reuse, by a longer run; a whole script runs once, whatever --iterations says."""
    undecided = report.undecided_cells
    scripts = [c for c in undecided if report.results[c].end.mode == "script"]
    if scripts and len(scripts) == len(undecided) and not report.missing_cells:
        return ("whole scripts run once and ended too soon to decide: define "
                "setup(params) and step(state) in them")
    if not undecided:
        return f"harness sweep {path_shown(matrix)} --resume {path_shown(root)} runs them"
    budgets = [b for c in cells if c.id in undecided
               and (b := c.settings.run_budget) is not None]
    if budgets:     # a budgeted cell runs longer by its seconds, not its cap
        return f"run longer: harness sweep {path_shown(matrix)} --budget {4 * max(budgets):g}s"
    longest = max((c.settings.max_iterations or c.settings.iterations for c in cells
                   if c.id in undecided), default=0)
    return f"run longer: harness sweep {path_shown(matrix)} --iterations {2 * longest or 1000}"


# What the reports need, imported while the first container runs (prefetch_analysis).
REPORTERS = ("harness.report.model", "harness.report.console", "harness.report.markdown",
             "harness.report.junit", "harness.report.html")


def compile_report_template() -> None:
    """report.html's template, compiled ahead (on the prefetch thread)."""
    reports.environment().get_template("report.html.j2")


def plan_of(cells: list[Cell]) -> tuple[Planned, ...]:
    """plan.json's cells: what a report checks the directory against."""
    return tuple(Planned(c.id, c.row, c.image.label, c.image.index) for c in cells)


def exit_code(report: Report) -> int:
    """1 when a cell is bad; else 2 when a scenario fails the same way on every image (a
    scenario bug, not a finding) or times out on every image (a run too short for
    the scenario: the `timeout:` or `iterations:` to change); else 3 when a cell could
    not be prepared (its image or pip pin is unavailable), since the sweep did not
    answer for it; else 4 when a cell is undecided (ambiguous after its re-runs) or a
    planned cell is missing from the directory: not a clean answer; else 0."""
    if report.findings:
        return EXIT_REGRESSION
    if report.broken_scenarios:
        return EXIT_BAD_INPUT
    if report.unavailable_cells:
        return EXIT_ENVIRONMENT
    if report.undecided_cells or report.missing_cells:
        return EXIT_UNDECIDED
    return EXIT_OK
