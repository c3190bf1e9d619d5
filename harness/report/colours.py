"""A verdict kind's colour (`harness.analysis.kinds`) on a terminal: as an ANSI code for
the plain table, as rich's style for the fitted one (`report.console`, `report.fitted`)."""

from __future__ import annotations

from harness.analysis.kinds import KINDS, Colour

ANSI: dict[Colour, str] = {"red": "31", "green": "32", "yellow": "33", "magenta": "35",
                           "cyan": "36", "grey": "90"}
STYLES: dict[Colour, str] = {"red": "red", "green": "green", "yellow": "yellow",
                             "magenta": "magenta", "cyan": "cyan", "grey": "bright_black"}


def colour_of(verdict: str) -> Colour | None:
    """The colour of a table cell: its verdict kind's; none for a cell with no kind
    ("not run", "unreadable", no cell)."""
    found = KINDS.get(verdict)
    return found.colour if found is not None else None
