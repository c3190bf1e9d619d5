"""The exit code of an answer: what `harness sweep`, `harness report` and the commands
that read a sweep's report exit with (kept apart from `app.sweep`, so that a command
that reads a run imports none of what runs one)."""

from __future__ import annotations

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

__all__ = ["exit_code"]


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
