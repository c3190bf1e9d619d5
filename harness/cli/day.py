"""`harness day DIR [ROW]`: the day a dated row (`as_of:`) went bad, and the packages
that changed that day (day/<row>/ of the results directory)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.app import answer
from harness.cli import FittedHelpFormatter, options
from harness.days.search import day_command

EPILOG = """examples:
  harness day reports/asof-demo                 each dated row's day, newest sweep
  harness day DIR cpu.multidict_pop             one row

A row over `as_of:` days (images NAME@DAY) whose first bad day follows a good one went
bad on a day between them. The days between are halved; a day is resolved (which pins
the index gave that day, cached for good) and run only when its pins are new: a day
that resolves as the last good or first bad day did takes that day's verdict. The
answer names the last good day, the first bad day and each package that changed
between their resolutions, with the time its new version was uploaded and each yanked
release it passes over ("passes over 6.5.0 (yanked: reason)": no day resolves to a
yanked release, docs/asof.md). The probes are cells in day/<row>/ of the results
directory; the answer is in day/<row>/day.json.

exit codes: 0 nothing to search (no dated row went bad after a good day), 1 the day
found, 2 bad input (no such directory or row), 3 environment unavailable (the index
cannot be reached), 4 a probe was untestable, 130 interrupted
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser("day", help="the day a dated (`as_of:`) row went bad, and what "
                                   "changed that day", epilog=EPILOG,
                       formatter_class=FittedHelpFormatter)
    p.add_argument("dir", type=Path, help="a results directory written by `harness sweep`")
    p.add_argument("row", nargs="?", help="only this row, e.g. cpu.multidict_pop (default: "
                                          "each dated row that went bad after a good day)")
    options.add(p, "matrix", "quiet")
    options.add(p, "format")
    p.set_defaults(func=run)


@answer.answers("day", {"dir": None, "rows": []})
def run(args: argparse.Namespace) -> int:
    options.check(args)
    root = answer.results_dir(args.dir, "day")
    return day_command(root, args.row, args.matrix, args.quiet)
