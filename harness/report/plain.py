"""The sweep's progress: `progress_for(quiet, samples)` gives plain `harness: ...` lines
(`PlainProgress`), nothing with `-q`, or on a TTY the live display (`report.live`), so a
sweep into a pipe imports no rich."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from harness.report.grid import console_width, wrap

if TYPE_CHECKING:
    from harness.matrixfile.model import Cell
    from harness.report.live import LiveProgress
    from harness.result.model import CellResult


class PlainProgress:
    """`harness: TEXT` on stderr, one line per event; nothing with `quiet`."""

    def __init__(self, quiet: bool = False, stream: TextIO | None = None):
        self.quiet = quiet
        self.stream = stream

    def __call__(self, text: str) -> None:
        """One event, wrapped at the terminal's width or COLUMNS, else as is."""
        if self.quiet:
            return

        stream = self.stream or sys.stderr
        width = console_width(stream)
        line = f"harness: {text}"
        print("\n".join(wrap(line, width)) if width else line, file=stream, flush=True)

    def cell(self, cell: Cell, event: str, result: CellResult | None) -> None:
        """Structured cell events; the plain lines already say everything."""

    def close(self) -> None:
        """Nothing to tear down."""


def progress_for(quiet: bool, samples: Callable[[str], Path], stream: TextIO | None = None
                 ) -> PlainProgress | LiveProgress:
    """The progress callback for this terminal: live on a TTY, plain lines otherwise."""
    out = stream or sys.stderr
    if quiet or not out.isatty() or os.environ.get("TERM") == "dumb":
        return PlainProgress(quiet, stream)
    # lazy: rich's live display, on a TTY alone
    from harness.report.live import LiveProgress

    return LiveProgress(samples)
