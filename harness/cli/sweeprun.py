"""What `harness sweep` does once its arguments are parsed (`cli.sweep` parses them):
the matrix read and its cells chosen, the sweep run by `sweeping.course`, its answer printed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from harness import matrixfile
from harness import report as reports
from harness.answers.kept import results_json
from harness.app import answer
from harness.cli import printer
from harness.errors import EXIT_OK, EXIT_UNDECIDED, InputError
from harness.report.grid import console_width, say
from harness.stages.options import SweepOptions, apply_overrides
from harness.sweeping import between
from harness.sweeping.course import (
    exit_code,
    how_to_decide,
    preflight,
    refused,
    sweep_and_report,
)

if TYPE_CHECKING:
    from harness.matrixfile.model import Cell
    from harness.report import Report


@answer.answers("sweep", {"dir": None, "files": [], "name": None, "cells": [], "images": [],
                          "rows": [], "bad_cells": [], "missing_cells": [],
                          "undecided_cells": [], "causes": {}})
def sweep(args: argparse.Namespace) -> int:
    """`harness sweep`'s run, its options checked."""
    if args.between is not None or args.scenario or args.python:
        args.matrix = between.matrix_file(args.between, args.scenario, args.python,
                                          args.matrix, args.out, printer(args.quiet))
    elif args.matrix is None:
        raise InputError(f"no matrix file: harness sweep MATRIX, or {between.USAGE}")
    matrix = matrixfile.load(args.matrix)
    args.resumes = (args.out, matrix.name, args.matrix)     # cli.after_interrupt
    cells = apply_overrides(matrixfile.select(matrix.cells, args.select), args.iterations,
                            args.warmup, args.budget)
    answer.update(name=matrix.name, cells=[c.id for c in cells])
    if args.list:
        # Checked as the sweep checks them, short of asking an engine (exit 2, not 0)
        preflight(cells, matrix, args.iterations)
        refused(options_of(args), matrix)
        for c in cells if not answer.active() else ():
            print(c.id)
        return EXIT_OK
    cells = preflight(cells, matrix, args.iterations)
    report, root, paths = sweep_and_report(options_of(args), matrix, cells,
                                           printer(args.quiet))
    show(args, report, (root, paths), cells)
    return exit_code(report)


def show(args: argparse.Namespace, report: Report, written: tuple[Path, list[Path]],
          cells: list[Cell]) -> None:
    """The sweep's table, where its results are and any incomplete note; in JSON mode
    the same from the report model."""
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
