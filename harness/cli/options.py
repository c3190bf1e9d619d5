"""The options the commands share, each defined once (`add`), and one check of their
values (`check`) every command's `run` calls first, so all refuse a bad value alike."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Literal

from harness.analysis.kinds import MIN_WIDTH
from harness.errors import InputError
from harness.matrixfile.model import RUNTIMES

Option = Literal["runtime", "docker-host", "iterations", "warmup", "out", "quiet", "width",
                 "format", "budget", "details", "matrix"]

QUIET_HELP = ("no progress lines (what runs, what was written); the answer and errors are "
              "printed")
DOCKER_HOST_HELP = "Docker endpoint (unix://, tcp://, ssh://user@host)"
FORMATS = ("console", "json")
FORMAT_HELP = ("console: the answer in words (the default); json: one JSON document on "
               "stdout (schema harness.answer/1, docs/json.md), progress on stderr, the same "
               "exit code")
WIDTH_HELP = ("fit the table to this width (default: the terminal's; piped: $COLUMNS, "
              "else one line per row)")


def add(p: argparse.ArgumentParser, *which: Option, per: str = "cell",
        out_keeps: str = "", docker_host_does: str = "",
        quiet_does: str = QUIET_HELP) -> None:
    """Add the chosen shared options to a command's parser, in the order given.

    Args:
        per: What --iterations, --warmup and --budget apply to ("cell", "probe").
        out_keeps, docker_host_does: Said after --out's default; before --docker-host's help.
        quiet_does: What -q leaves out, for a command that prints no progress.
    """
    for name in which:
        if name == "runtime":
            p.add_argument("--runtime", choices=RUNTIMES, help="override `runtime:`")
        elif name == "docker-host":
            p.add_argument("--docker-host", help=(f"{docker_host_does}: " if docker_host_does
                                                  else "") + DOCKER_HOST_HELP)
        elif name == "iterations":
            p.add_argument("--iterations", type=int,
                           help=f"override iterations for every {per} (in early-stop mode, "
                                "max_iterations, raised to what a decision needs); no "
                                "re-run or confirmation round runs longer")
        elif name == "warmup":
            p.add_argument("--warmup", type=int,
                           help=f"override warm-up iterations for every {per}")
        elif name == "out":
            p.add_argument("--out", type=Path, default=Path("reports"),
                           help="results base directory (default: reports/)"
                                + (f"; {out_keeps}" if out_keeps else ""))
        elif name == "budget":
            p.add_argument("--budget", metavar="SECONDS",
                           help=f"override every {per}'s time budget (e.g. 20s, 2m): "
                                "early-stop mode, max_iterations the cap (set: as it is; "
                                "else 1,000,000)")
        elif name == "format":
            p.add_argument("--format", choices=FORMATS, default="console", help=FORMAT_HELP)
        elif name == "quiet":
            p.add_argument("-q", "--quiet", action="store_true", help=quiet_does)
        elif name == "details":
            p.add_argument("--details", action="store_true",
                           help="every cell in full words below the table (by default only "
                                "the bad, suspected and undecided ones, where cells are a "
                                "grid)")
        elif name == "matrix":
            p.add_argument("--matrix", type=Path,
                           help="the sweep's matrix file (default: the one its plan.json "
                                "names)")
        else:
            p.add_argument("--width", type=int, metavar="COLUMNS",
                           help=WIDTH_HELP)


def check(args: argparse.Namespace) -> None:
    """The shared options' values, checked alike for every command that takes them.

    Raises:
        InputError: --iterations < 1, --warmup < 0, or --width too narrow.
    """
    iterations = getattr(args, "iterations", None)
    if iterations is not None and iterations < 1:
        raise InputError(f"--iterations {iterations}: must be >= 1 (the measured calls of "
                         "each cell); e.g. --iterations 300")
    warmup = getattr(args, "warmup", None)
    if warmup is not None and warmup < 0:
        raise InputError(f"--warmup {warmup}: must be >= 0 (the calls before measuring; "
                         "0 for none)")
    width = getattr(args, "width", None)
    if width is not None and width < MIN_WIDTH:
        raise InputError(f"--width {width}: the table needs at least {MIN_WIDTH} "
                         "columns; pass a larger width, or none for the terminal's")
