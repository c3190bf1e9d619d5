"""`harness report DIR --why CELL`: the rules in order on one recorded cell's evidence,
printed (`app.why` reads them)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from harness.app import why as reading
from harness.app.command import exit_code

if TYPE_CHECKING:
    from harness.report import Report
    from harness.store.gate import Gated


def why(args: argparse.Namespace, recorded: Report, gated: Gated) -> int:
    """Print why CELL got its verdict; exit as `harness report DIR` does.

    Raises:
        InputError: no current cell of that id, or its rules cannot be read again.
    """
    for line in reading.why(args.why, args.dir, recorded, gated):
        print(line)
    return exit_code(recorded)
