"""`harness sweep matrix.yaml`: run every cell, decide verdicts, name the first bad."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import matrixfile
from harness import report as reports
from harness.app.sweep import (
    SweepOptions,
    apply_overrides,
    exit_code,
    how_to_decide,
    preflight,
    sweep_and_report,
)
from harness.cli import answer, between, options, printer
from harness.cli.helptext import FittedHelpFormatter
from harness.days.cause import results_json
from harness.errors import EXIT_OK, EXIT_UNDECIDED, InputError
from harness.report.grid import console_width, say

if TYPE_CHECKING:
    from harness.matrixfile.model import Cell
    from harness.report import Report


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
    cells = apply_overrides(matrixfile.select(matrix.cells, args.select), args.iterations,
                            args.warmup, args.budget)
    answer.update(name=matrix.name, cells=[c.id for c in cells])
    if args.list:
        for c in cells if not answer.active() else ():
            print(c.id)
        return EXIT_OK
    cells = preflight(cells, matrix, args.iterations)
    report, root, paths = sweep_and_report(options_of(args), matrix, cells,
                                           printer(args.quiet))
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


def options_of(args: argparse.Namespace) -> SweepOptions:
    """The sweep asked by the command line."""
    return SweepOptions(args.matrix, args.out, args.resume, args.runtime, args.docker_host,
                        args.quiet, args.between is not None, args.explain, args.find_cause,
                        args.iterations, args.warmup, args.budget)
