"""`harness fit matrix.yaml --param batch=1..64`: the largest value that runs, per row."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.app import answer
from harness.cli import options
from harness.fit import FitAsked, FitReport, fit_command


def add_parser(sub: Any) -> None:
    p = sub.add_parser("fit", help="largest value of an integer param that runs, per row")
    p.add_argument("matrix", type=Path, help="matrix YAML file")
    p.add_argument("--param", metavar="NAME=LO..HI",
                   help="the integer scenario param and its range, e.g. batch=1..64 "
                        "(default: the matrix's `fit:` block)")
    p.add_argument("-k", dest="select", metavar="EXPR",
                   help="only the rows (cells) whose id matches, as in `harness sweep -k`")
    options.add(p, "out", "runtime", "docker-host", "iterations", "warmup", "budget", "quiet",
                per="probe", out_keeps="probes are kept in <out>/<name>/fit-<param> and "
                                       "reused on the next run")
    options.add(p, "format")
    p.set_defaults(func=run)


@answer.answers("fit", {"dir": None, "param": None, "range": [], "bound": None, "rows": [],
                        "first_smaller": []})
def run(args: argparse.Namespace) -> int:
    options.check(args)
    code, report, root = fit_command(FitAsked(
        args.matrix, args.param, args.select, args.out, args.runtime, args.docker_host,
        args.iterations, args.warmup, args.budget, args.quiet))
    shown(report, root)
    return code


def shown(report: FitReport, root: Path) -> None:
    """The boundaries in words, or in JSON mode fit.json's document and its directory."""
    if answer.active():
        answer.update(dir=str(root), **report.to_json())
        return
    print()
    print(report.console())
    reused = sum(r.reused for r in report.rows)
    if reused:
        print(f"\n{reused} probe(s) reused from {root}, "
              f"{sum(r.runs for r in report.rows)} run")
    print(f"\nresults: {root} (fit.md, fit.json, fit.html)")
