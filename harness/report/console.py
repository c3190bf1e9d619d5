"""The terminal table: fits the terminal's width; colour only on a TTY without NO_COLOR."""

from __future__ import annotations

import os
import shutil
from typing import TextIO

from tabulate import tabulate

from harness.analysis.kinds import KINDS, Colour
from harness.report.model import Reporter

# A kind's colour (harness.analysis.kinds) as an ANSI code, and as rich's style.
ANSI: dict[Colour, str] = {"red": "31", "green": "32", "yellow": "33", "magenta": "35",
                           "cyan": "36", "grey": "90"}
STYLES: dict[Colour, str] = {"red": "red", "green": "green", "yellow": "yellow",
                             "magenta": "magenta", "cyan": "cyan", "grey": "bright_black"}
MIN_WIDTH = 40   # columns: narrower, the fitted table has no room for a verdict


def table_width(out: TextIO, width: int | None = None) -> int | None:
    """The width a table on `out` must fit: `width` (--width) if given, else the
    terminal's, else $COLUMNS when piped; None: no limit (one plain line per row)."""
    if width is not None:
        return width
    if out.isatty():
        return shutil.get_terminal_size((100, 24)).columns
    if os.environ.get("COLUMNS", "").strip().isdigit():
        # Piped, but the caller said how wide (CI logs, `COLUMNS=100 harness ... | less`).
        return max(MIN_WIDTH, int(os.environ["COLUMNS"]))
    return None


class ConsoleReporter(Reporter):
    def render(self, out: TextIO, colour: bool | None = None, width: int | None = None
               ) -> None:
        """The table and the answers. On a terminal (or with `width`, or `COLUMNS` set
        when piped) the table fits the width: cells wrap, and with too many images for
        columns the table is transposed (images down); elsewhere it is one plain line per
        row, for logs and grep.
        Colour only on a terminal and never with NO_COLOR."""
        tty = out.isatty()
        if colour is None:
            colour = tty and not os.environ.get("NO_COLOR")
        width = table_width(out, width)
        if width is not None:
            self._fitted(out, width, colour)
        else:
            header, body = self.report.table()
            if colour:
                body = [[_paint(c) for c in row] for row in body]
            out.write(tabulate(body, headers=header, tablefmt="simple") + "\n")
        notes = self.report.unavailable_notes()
        if notes:
            out.write(f"\nnot run ({len(self.report.unavailable_cells)} unavailable "
                      f"cell{'s' if len(self.report.unavailable_cells) != 1 else ''}):\n")
            for note in notes:
                out.write("  " + note.replace("\n", "\n  ") + "\n")
        for cid, lines in self.report.crash_frames().items():
            out.write(f"\n{cid}: {self.report.results[cid].reason}\n")
            for line in lines:
                out.write(f"  {line}\n")
        for row in self.report.rows:
            if row.first_bad or row.scenario_error:
                out.write(f"\n{row.row}: {row.sentence}\n")
                for what, good, bad in row.diff[:15]:
                    out.write(f"  {what}: {good} -> {bad}\n")
                if len(row.diff) > 15:
                    out.write(f"  ... {len(row.diff) - 15} more differences in report.md\n")
            for _, _, cid in row.cells:
                found = self.report.where_lines(cid)
                if found and self.report.explained[cid].role in ("first bad", "cell"):
                    out.write(f"\nwhere, {cid} ({self.report.explained[cid].role}):\n")
                    for text in found[:12]:
                        out.write(f"  {text}\n")


    def render_where(self, out: TextIO, cells: list[str]) -> None:
        """`harness explain`'s answer: per explained cell, the diff with its paired cell
        (else what its own run showed), the notes, and what the paired run showed."""
        r = self.report
        for cid in cells:
            ex = r.explained.get(cid)
            if ex is None:
                out.write(f"{cid}: not explained (its attributed run failed)\n\n")
                continue
            res = r.results.get(cid)
            head = f"{cid}: {res.verdict} ({res.reason})" if res is not None else cid
            out.write(f"{head}\n  where ({ex.role}"
                      + (f", against {ex.paired}" if ex.paired else "")
                      + f"; {ex.calls} calls with --attribute {','.join(ex.kinds)}):\n")
            for text in r.where_lines(cid):
                out.write(f"  {text}\n")
            paired = r.explained.get(ex.paired) if ex.paired else None
            if paired is not None:
                out.write(f"  {paired.cell} ({paired.role}), its own run:\n")
                for text in (*paired.summary, *paired.notes):
                    out.write(f"    {text}\n")
            out.write("\n")

    def _fitted(self, out: TextIO, width: int, colour: bool) -> None:
        from rich import box
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        console = Console(file=out, width=width, no_color=not colour, force_terminal=colour,
                          highlight=False, emoji=False)
        header, body = self.report.table()
        images = header[1:-1]

        def text(value: str) -> Text:
            named = colour_of(value)
            return Text(value, style=STYLES[named] if colour and named else "")

        # One column per image, each wide enough for its name and a wrapped verdict.
        widths = [min(max(MIN_COLUMN, len(h)), 28) for h in images]
        row_width = min(max(len(r[0]) for r in body), 30) if body else 10
        if sum(w + 3 for w in widths) + row_width + 3 + MIN_COLUMN <= width:
            table = Table(box=box.SIMPLE_HEAD, expand=False, show_edge=False, pad_edge=False)
            table.add_column(header[0], overflow="fold", min_width=min(row_width, 12))
            for h, w in zip(images, widths, strict=True):
                table.add_column(h, overflow="fold", min_width=w)
            table.add_column(header[-1], overflow="fold", min_width=MIN_COLUMN)
            for row in body:
                table.add_row(row[0], *(text(c) for c in row[1:-1]), row[-1])
            console.print(table)
            return
        # Too many images: images down, rows across (with the answers below).
        rows = [r[0] for r in body]
        table = Table(box=box.SIMPLE_HEAD, expand=False, show_edge=False, pad_edge=False)
        table.add_column("image", overflow="fold")
        for name in rows:
            table.add_column(name, overflow="fold")
        for i, image in enumerate(images):
            table.add_row(image, *(text(r[1 + i]) for r in body))
        console.print(table)
        for answer, r in zip(self.report.rows, body, strict=True):
            if not (answer.first_bad or answer.scenario_error):   # those are said below
                console.print(f"{r[0]}: {r[-1]}", markup=False)


MIN_COLUMN = 16


def colour_of(text: str) -> Colour | None:
    """The colour of a table cell ("leak: +5.9 KiB/call"): its verdict kind's; none for
    a cell with no verdict ("not run", "unreadable")."""
    found = KINDS.get(text.split(" ", 1)[0].rstrip(":"))
    return found.colour if found is not None else None


def _paint(text: str) -> str:
    named = colour_of(text)
    return f"\x1b[{ANSI[named]}m{text}\x1b[0m" if named else text

