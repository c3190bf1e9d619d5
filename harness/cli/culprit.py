"""`harness culprit DIR [ROW]`: which package change made a row's first bad image bad,
proved by swapping it both ways (culprit/<row>/ of the results directory)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.app import answer
from harness.cli import FittedHelpFormatter, options
from harness.culprit.app import CulpritAsked, culprit_command

EPILOG = """examples:
  harness culprit reports/culprit-demo/20261123-080000      every row's first bad image
  harness culprit DIR cpu.aiohttp_stack                     one row
  harness culprit DIR ROW --good IMAGE --bad IMAGE          any two images of the row
  harness culprit DIR ROW --swap tensorflow                 swap one package both ways

Between the row's last good image G and its first bad image B (for a dated row that
`harness day` or --find-cause searched, between the last good and first bad day it
found), every Python package that changed, came or went is a change. Hybrid images
(B with a set of changes undone, G with it applied) run as cells through the sweep's
stages and verdict rules; delta debugging halves the set until one change (or a pair
that only matters together) is left, proved both ways: B without it is good and G with
it is bad. A hybrid that cannot be built or run is untestable, never counted good or
bad. Hybrids are venvs on the local runtime (cached by their pins; pins the resolver
refuses together, as a release that pins another exactly, installed --no-deps, so the
two are still swapped apart); on docker and podman, images built offline from B (or G)
with each package's files (as its *.dist-info/RECORD lists them) taken from the other
image, kept as harness-culprit/<label>:<key> for `docker run`.
The answer goes to culprit/<row>/culprit.json, results.json and the reports.

exit codes: 0 B is not bad, or ROW has no bad image after a good one (nothing to
search), 1 the cause named (or shown to be outside the packages), 2 bad input (no such
directory or row, no bad row, --good/--bad that name one image, a bad G or a good B),
3 environment unavailable (no hybrid could be built or run), 4 no culprit proved
(untestable hybrids, a set that fixes B but does not break G) or G or B stale (run
since the matrix changed: the fix line runs them again), 130 interrupted
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "culprit", help="which package change made the first bad image bad, proved both ways",
        formatter_class=FittedHelpFormatter, epilog=EPILOG)
    p.add_argument("dir", type=Path, help="a results directory written by `harness sweep`")
    p.add_argument("row", nargs="?", help="only this row, e.g. cpu.multidict_pop (default: "
                                          "each row with a first bad image)")
    p.add_argument("--good", metavar="IMAGE", help="G: this image of the row (label)")
    p.add_argument("--bad", metavar="IMAGE", help="B: this image of the row (label)")
    options.add(p, "matrix")
    p.add_argument("--swap", action="append", default=[], metavar="PACKAGE",
                   help="no search: swap these packages (repeatable) both ways and run the "
                        "two hybrids, even where B is not bad")
    p.add_argument("--repeats", type=int, default=1,
                   help="extra runs of a hybrid whose verdict stays ambiguous (default 1)")
    options.add(p, "runtime", "docker-host", "quiet")
    options.add(p, "format")
    p.set_defaults(func=run)


@answer.answers("culprit", {"dir": None, "rows": []})
def run(args: argparse.Namespace) -> int:
    options.check(args)
    asked = CulpritAsked(args.row, args.good, args.bad, args.matrix, tuple(args.swap),
                         args.repeats, args.runtime, args.docker_host, args.quiet)
    root = answer.results_dir(args.dir, "culprit")
    return culprit_command(root, asked)
