"""`harness explain DIR [CELL]`: where the first bad cell of each row leaks or slows,
against its last good cell (both run again with attribution; cells/<id>/where.json)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from harness.app import answer
from harness.cli import FittedHelpFormatter, options
from harness.errors import EXIT_ENVIRONMENT
from harness.explain import explain_command
from harness.report import ConsoleReporter, Report

EPILOG = """examples:
  harness explain reports/multidict-pop/20261123-080000     every row's first bad vs last good
  harness explain DIR multidict-6.5.1.cpu.multidict_pop     one cell (with its last good)
  harness sweep examples/multidict.yaml --explain           the sweep, then explain

Each explained cell runs again with the agent's --attribute: memory verdicts with
tracemalloc (heap), PyTorch's CUDA allocator history (device) and memray (native, where
the image has it); time verdicts with a stack sampler and per-op times (TensorFlow 1
step stats, torch.profiler). These runs are slower and decide no verdict. The answer
goes to cells/<id>/where.json and into report.md, report.html and `--issue`.

exit codes: 0 explained (or nothing to explain), 2 bad input (no such directory or
cell, no matrix), 3 environment unavailable (no engine; no attributed run succeeded),
4 nothing explained: the cells to explain changed since the sweep (its fix line runs
them again), 130 interrupted
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "explain", help="where the first bad cell leaks or slows, against the last good one",
        formatter_class=FittedHelpFormatter, epilog=EPILOG)
    p.add_argument("dir", type=Path, help="a results directory written by `harness sweep`")
    p.add_argument("cell", nargs="?", help="only this cell (default: each row's first bad)")
    options.add(p, "matrix", "runtime", "docker-host", "quiet")
    options.add(p, "format")
    p.set_defaults(func=run)


@answer.answers("explain", {"dir": None, "cells": []})
def run(args: argparse.Namespace) -> int:
    options.check(args)
    root = answer.results_dir(args.dir, "explain")
    out = explain_command(root, args.cell, args.matrix, args.runtime, args.docker_host,
                          args.quiet)
    if out.report is not None:
        shown(out.report, out.cells)
    if out.code == EXIT_ENVIRONMENT:
        print("harness: no attributed run left a where record; see explain/*/agent.log",
              file=sys.stderr)
    return out.code


def shown(report: Report, cells: list[str]) -> None:
    """explain's answer for `cells`, in words or in JSON mode from the report model."""
    if not answer.active():
        ConsoleReporter.from_results(report).render_where(sys.stdout, cells)
        return
    out = []
    for cid in cells:
        ex = report.explained.get(cid)
        paired = report.explained.get(ex.paired) if ex is not None and ex.paired else None
        out.append({"cell": cid, "result": answer.cell_ref(report.results.get(cid)),
                    "where": ex.to_json() if ex is not None else None,
                    "paired_where": paired.to_json() if paired is not None else None})
    answer.update(cells=out)
