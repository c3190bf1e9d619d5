"""`harness report DIR`: re-render reports from stored results."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from harness.errors import EXIT_OK, EXIT_REGRESSION, InputError
from harness.report import ConsoleReporter, Report, load_results, write_all
from harness.store import RunStore, load_json


def add_parser(sub: Any) -> None:
    p = sub.add_parser("report", help="re-render reports from a results directory")
    p.add_argument("dir", type=Path, help="reports/<name>/<timestamp>")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    results = load_results(args.dir)
    if not results:
        raise InputError(f"{args.dir}: no cells/*/result.json here; pass a directory "
                         "written by `harness sweep`")
    old = load_json(args.dir / "results.json") or {}
    name = old.get("name") or args.dir.parent.name
    report = Report.from_results(name, results, old.get("meta"))
    store = RunStore(args.dir)
    write_all(store, report)
    ConsoleReporter.from_results(report).render(sys.stdout)
    return EXIT_REGRESSION if report.bad_cells else EXIT_OK
