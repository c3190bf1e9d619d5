"""`harness sweep`'s --between, --scenario and --python (the matrix they make:
`sweeping.between`)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add(p: argparse.ArgumentParser) -> None:
    """--between, --scenario and --python on `harness sweep`."""
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
