"""Progress lines, as every command and `harness.sweep(progress=True)` print them."""

from __future__ import annotations

import sys
from collections.abc import Callable


def printer(quiet: bool) -> Callable[[str], None]:
    """Progress lines on stderr (`harness: ...`), or nothing with -q; on a terminal
    wrapped at its width between words (a path at its slashes), never where the
    terminal would cut them."""
    def progress(text: str) -> None:
        if quiet:
            return
        line = f"harness: {text}"
        if sys.stderr.isatty():
            # lazy: report.grid (and the result model below it) only where stderr is a
            # terminal: `harness --help` imports nothing of harness but the CLI's package
            # and this module
            from harness.report.grid import console_width, wrap

            width = console_width(sys.stderr)
            line = "\n".join(wrap(line, width, more="  ")) if width else line
        print(line, file=sys.stderr, flush=True)

    return progress
