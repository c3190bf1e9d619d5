"""`harness sweep matrix.yaml`: run every cell, decide verdicts, name the first bad."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.cli import FittedHelpFormatter, options

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
    options.add(p, "width", "details")
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
    options.add(p, "budget")
    p.add_argument("--list", action="store_true", help="print the cell ids and exit")
    add_between(p)
    options.add(p, "quiet", "format")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    options.check(args)
    # lazy: the sweep's start-up boundary: `sweep --help` loads no stages or reporters
    from harness.cli.sweeprun import sweep

    return sweep(args)


def add_between(p: argparse.ArgumentParser) -> None:
    """--between, --scenario and --python on `harness sweep` (`sweeping.between`)."""
    p.add_argument("--between", nargs=2, type=Path, metavar=("OLD", "NEW"),
                   help="two lock files (requirements.txt with pins and --hash lines, "
                        "pylock.toml, uv.lock) swept as one row's images, OLD the last "
                        "good; where NEW is bad, the package change that did it is "
                        "searched and proved (harness culprit)")
    p.add_argument("--scenario", action="append", type=Path, metavar="FILE",
                   help="with --between: the scenario to run (repeatable; instead of a "
                        "matrix's scenarios)")
    p.add_argument("--python", metavar="INTERPRETER",
                   help="with --between: the interpreter the venvs are built with "
                        "(default: harness's own)")
