"""What every command shares at its edges, light enough for `harness --help` to import:
progress lines (`printer`), the head-start threads held until exit (`hold`, `wait`: an
interpreter ending under a thread inside a C extension's import can die of it), and an
answer's exit code (`exit_code`, apart from `sweeping.course` so a command that reads a
run imports none of what runs one)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from harness.errors import (
    EXIT_BAD_INPUT,
    EXIT_ENVIRONMENT,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_UNDECIDED,
)

if TYPE_CHECKING:
    from harness.report import Report

__all__ = ["exit_code", "hold", "printer", "wait"]


def printer(quiet: bool) -> Callable[[str], None]:
    """Progress lines on stderr (`harness: ...`), or nothing with -q; on a terminal
    wrapped at its width between words (a path at its slashes)."""
    def progress(text: str) -> None:
        if quiet:
            return
        line = f"harness: {text}"
        if sys.stderr.isatty():
            # lazy: report.grid only where stderr is a terminal (`harness --help` stays light)
            from harness.report.grid import console_width, wrap

            width = console_width(sys.stderr)
            line = "\n".join(wrap(line, width, more="  ")) if width else line
        print(line, file=sys.stderr, flush=True)

    return progress


_HELD: list[threading.Thread] = []


def hold(thread: threading.Thread) -> threading.Thread:
    """`thread`, kept to be waited for before the command exits; returned as it is."""
    _HELD.append(thread)
    return thread


def wait(timeout: float = 60.0) -> None:
    """Wait for every head start held that still runs, each at most `timeout` seconds."""
    while _HELD:
        _HELD.pop().join(timeout=timeout)


def exit_code(report: Report) -> int:
    """The exit code of an answer: 1 when a cell is bad; else 2 when a scenario fails or
    times out the same way on every image (not a finding); else 3 when a cell could not
    be prepared; else 4 when a cell is undecided or a planned cell is missing; else 0."""
    if report.findings:
        return EXIT_REGRESSION
    if report.broken_scenarios:
        return EXIT_BAD_INPUT
    if report.unavailable_cells:
        return EXIT_ENVIRONMENT
    if report.undecided_cells or report.missing_cells:
        return EXIT_UNDECIDED
    return EXIT_OK
