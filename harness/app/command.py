"""What every command shares at its edges, light enough for `harness --help` to import:
its progress lines (`printer`), the head starts it holds until it exits (`hold`,
`wait`: `stages.orchestrator.prefetch_analysis`'s imports of NumPy, the deciding modules and
the reporters on a thread while the first cell runs; an interpreter that ends under a
thread inside a C extension's import can die of it, so `cli.finish` waits for them),
and the exit code of an answer (`exit_code`: what `harness sweep`, `harness report` and
the commands that read a sweep's report exit with; apart from `sweeping.course`, so that a
command that reads a run imports none of what runs one)."""

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
    """1 when a cell is bad; else 2 when a scenario fails the same way on every image (a
    scenario bug, not a finding) or times out on every image (a run too short for
    the scenario: the `timeout:` or `iterations:` to change); else 3 when a cell could
    not be prepared (its image or pip pin is unavailable), since the sweep did not
    answer for it; else 4 when a cell is undecided (ambiguous after its re-runs) or a
    planned cell is missing from the directory: not a clean answer; else 0."""
    if report.findings:
        return EXIT_REGRESSION
    if report.broken_scenarios:
        return EXIT_BAD_INPUT
    if report.unavailable_cells:
        return EXIT_ENVIRONMENT
    if report.undecided_cells or report.missing_cells:
        return EXIT_UNDECIDED
    return EXIT_OK
