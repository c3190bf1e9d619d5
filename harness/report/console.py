"""The terminal table: fits the terminal's width; colour only on a TTY without NO_COLOR."""

from __future__ import annotations

import itertools
import os
import re
import textwrap
from typing import TextIO

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text
from tabulate import tabulate

from harness.analysis.kinds import IN_DOUBT, KINDS, Colour
from harness.answers.search import RowAnswer
from harness.report.grid import (
    DETAILS,
    Grid,
    conclusions,
    console_width,
    runs,
    wrap,
)
from harness.report.model import Reporter

# A kind's colour (harness.analysis.kinds) as an ANSI code, and as rich's style.
ANSI: dict[Colour, str] = {"red": "31", "green": "32", "yellow": "33", "magenta": "35",
                           "cyan": "36", "grey": "90"}
STYLES: dict[Colour, str] = {"red": "red", "green": "green", "yellow": "yellow",
                             "magenta": "magenta", "cyan": "cyan", "grey": "bright_black"}


class ConsoleReporter(Reporter):
    _runs = False       # the grid was said as runs, a block per answer (`grid.runs`)

    def render(self, out: TextIO, colour: bool | None = None, width: int | None = None,
               details: bool = False) -> None:
        """The table and the answers. On a terminal (or with `width`, or `COLUMNS` set
        when piped) everything fits the width: where full words fit, the table (cells
        wrap, and with too many images for columns it is transposed, images down); where
        they do not, a grid of one token per cell (`harness.report.grid`), the rows'
        answers grouped, and the full words only of bad, suspected and undecided cells
        (of every cell with `details`); every line after it wrapped at the width.
        Elsewhere the table is one plain line per row, for logs and grep.
        Colour only on a terminal and never with NO_COLOR."""
        if colour is None:
            colour = out.isatty() and not os.environ.get("NO_COLOR")
        width = console_width(out, width)
        gridded = False
        if width is not None:
            gridded = self._fitted(out, width, colour)
        else:
            header, body = self.report.table()
            if colour:
                body = [[row[0], *map(_paint, row[1:-1], said), row[-1]]
                        for row, said in zip(body, self.report.table_verdicts(), strict=True)]
            out.write(tabulate(body, headers=header, tablefmt="simple") + "\n")

        def say(text: str, indent: str = "") -> None:
            lines = wrap(text, width, indent) if width is not None else [indent + text]
            out.write("".join(line + "\n" for line in lines))

        notes = self.report.unavailable_notes()
        if notes:
            say(f"\nnot run ({len(self.report.unavailable_cells)} unavailable "
                f"cell{'s' if len(self.report.unavailable_cells) != 1 else ''}):")
            for note in notes:
                say(note, "  ")
        crashed = list(self.report.crash_frames().items())
        for cid, lines in crashed[: None if details or not gridded else DETAILS]:
            say(f"\n{cid}: {self.report.results[cid].reason}")
            for line in lines:
                say(line, "  ")
        if gridded:
            self._answers(out, width or 80, details)
        elif width is not None and _repeated(answered := [
                row for row in self.report.rows if row.first_bad or row.scenario_error]):
            # Rows with the same answer said once, the rows named.
            out.write("\n" + "".join(f"{line}\n" for line in
                                      conclusions(answered, width, named=True)))
        else:
            for row in self.report.rows:
                if row.first_bad or row.scenario_error:
                    say(f"\n{row.row}: {row.sentence}")
                    for what, good, bad in row.diff[:15]:
                        say(f"{what}: {good} -> {bad}", "  ")
                    if len(row.diff) > 15:
                        say(f"... {len(row.diff) - 15} more differences in report.md", "  ")
        for row in self.report.rows:
            cause = self.report.cause_lines(row.row)
            if cause:
                say(f"\ncause, {row.row}: {cause[0]}")
            culprit = self.report.culprit_lines(row.row)
            if culprit and not cause:
                say(f"\nculprit, {row.row}: {culprit[0]}")
        for row in self.report.rows:
            for _, _, cid in row.cells:
                found = self.report.where_lines(cid)
                if found and self.report.explained[cid].role in ("first bad", "cell"):
                    say(f"\nwhere, {cid} ({self.report.explained[cid].role}):")
                    for text in found[:12]:
                        say(text, "  ")
            if row.row in self.report.stale_where:
                say(f"\nwhere, {row.row}: {self.report.stale_where[row.row]}")

    def _answers(self, out: TextIO, width: int, details: bool) -> None:
        """Below the grid: the rows' answers grouped, then the cells in full words (the
        first bad of each row, the suspected and undecided ones, the other bad ones;
        every cell with `details`), at most DETAILS of them without it."""
        r = self.report
        if not self._runs:      # the runs said each answer already
            out.write("\n" + "".join(f"{line}\n" for line in conclusions(r.rows, width)))
        firsts = [cid for row in r.rows for label, _, cid in row.cells
                  if label == row.first_bad]
        if details:
            said = [cid for row in r.rows for _, _, cid in row.cells if cid in r.results]
        else:
            doubt = [cid for cid, res in sorted(r.results.items())
                     if res.verdict in IN_DOUBT]
            said = []
            for cid in (*firsts, *doubt, *r.bad_cells):
                if cid not in said:
                    said.append(cid)
        if not said:
            return
        shown = said if details else said[:DETAILS]
        out.write("\ncells in words" + ("" if details else
                                          " (first bad, suspected, undecided, bad)") + ":\n")
        for cid in shown:
            res = r.results.get(cid)
            if res is not None:
                out.write("".join(f"{line}\n" for line in wrap(
                    f"{cid}: {r.text_of(cid)}", width, "  ")))
        if len(said) > len(shown):
            out.write("".join(f"{line}\n" for line in wrap(
                f"... {len(said) - len(shown)} more: --details, or report.md", width, "  ")))

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

    def _fitted(self, out: TextIO, width: int, colour: bool) -> bool:
        """The table where full words fit (images across, else down); else the grid.
        True when it drew the grid."""
        if self.report.large:    # a block per answer, each pattern of rows a line
            grid = Grid(self.report.images, self.report.rows, self.report.results, width,
                        colour)
            lines = runs(self.report.rows, self.report.images, self.report.results, width)
            out.write("".join(f"{line}\n" for line in [*lines, "", *grid.legend()]))
            self._runs = True
            return True
        console = Console(file=out, width=width, no_color=not colour, force_terminal=colour,
                          highlight=False, emoji=False)
        header, body = self.report.table()
        verdicts = self.report.table_verdicts()
        images = header[1:-1]

        def text(value: str, verdict: str) -> Text:
            named = colour_of(verdict)
            return Text(value, style=STYLES[named] if colour and named else "")

        # One column per image, each wide enough for its name and a wrapped verdict.
        widths = [min(max(MIN_COLUMN, len(h)), 28) for h in images]
        row_width = min(max(len(r[0]) for r in body), 30) if body else 10
        # The row names and the answers are held at their widths (rich narrows any
        # column past its min_width to fit, and cut names and "first bad / last good"
        # mid-word); the images' columns give way, wrapping at spaces.
        answers = [r[-1] for r in body] + [header[-1]]
        longest = max((len(w) for a in answers for w in a.split()), default=0)
        room = width - row_width - sum(w + 3 for w in widths) - 3
        rows = [r[0] for r in body]
        image_w = max((len(i) for i in images), default=5)
        whole = [max(len(name), *(len(r[1 + i]) for i in range(len(images))))
                 for name, r in zip(rows, body, strict=True)]
        if room >= max(MIN_COLUMN, longest):
            answer_w = min(room, max(MIN_COLUMN, longest, *(two_lines(a) for a in answers)))
            # The images' columns share what is left (3 columns between two columns),
            # each as wide as keeps a figure beside its unit ("13.4" / "µs/call"); where
            # no widths do that and images down fit a cell a line, images go down.
            left = width - row_width - answer_w - 3 * (len(images) + 1)
            columns = [[h, *(r[1 + i] for r in body)] for i, h in enumerate(images)]
            kept = unit_widths(columns, left, widths)
            if kept is not None or image_w + sum(w + 3 for w in whole) > width:
                share = max(left // max(1, len(images)), 1)
                table = Table(box=box.SIMPLE_HEAD, expand=False, show_edge=False,
                              pad_edge=False)
                table.add_column(header[0], overflow="fold", width=row_width)
                for i, h in enumerate(images):
                    table.add_column(h, overflow="fold", width=kept[i] if kept else max(
                        widths[i], min(share, max(map(len, columns[i])))))
                table.add_column(header[-1], overflow="fold", width=answer_w)
                for row, said in zip(body, verdicts, strict=True):
                    table.add_row(row[0], *map(text, row[1:-1], said), row[-1])
                console.print(table)
                return False
        # Too many images: images down, rows across (with the answers below), where each
        # row's column holds its cells' words on one line where the width has room for
        # that, else in two lines.
        # Half of each cell's words is the least its column can be: where even that does
        # not fit, the grid, without working out each column's width.
        least = [max(len(name), *((len(r[1 + i]) + 1) // 2 for i in range(len(images))))
                 for name, r in zip(rows, body, strict=True)]
        if image_w + sum(w + 3 for w in whole) <= width:
            need = whole
        elif image_w + sum(w + 3 for w in least) > width:
            need = least
        else:    # a figure beside its unit where the width has room for that too
            for keep in (True, False):
                need = [max(len(name), *(two_lines(r[1 + i], keep)
                                         for i in range(len(images))))
                        for name, r in zip(rows, body, strict=True)]
                if image_w + sum(w + 3 for w in need) <= width:
                    break
        if image_w + sum(w + 3 for w in need) > width:
            grid = Grid(images, self.report.rows, self.report.results, width, colour)
            out.write("".join(f"{line}\n" for line in [*grid.lines(), "", *grid.legend()]))
            return True
        table = Table(box=box.SIMPLE_HEAD, expand=False, show_edge=False, pad_edge=False)
        table.add_column("image", overflow="fold", width=image_w)
        for name, w in zip(rows, need, strict=True):   # each row's name whole (it fits)
            table.add_column(name, overflow="fold", width=w)
        for i, image in enumerate(images):
            table.add_row(image, *(text(r[1 + i], v[i]) for r, v in zip(body, verdicts,
                                                                         strict=True)))
        console.print(table)
        for answer, r in zip(self.report.rows, body, strict=True):
            if not (answer.first_bad or answer.scenario_error):   # those are said below
                console.print(f"{r[0]}: {r[-1]}", markup=False)
        return False


def _repeated(rows: list[RowAnswer]) -> bool:
    """Whether two of the rows give the same answer (first bad and differences)."""
    seen = [(row.sentence, tuple(row.diff)) for row in rows]
    return len(set(seen)) < len(seen)


def two_lines(text: str, keep_units: bool = True) -> int:
    """The narrowest column that holds `text` in two lines, broken between words and
    (`keep_units`) not between a figure and its unit ("15.9" / "µs/call") where up to
    `KEEP_UNIT` columns wider keeps them together."""
    longest = max((len(w) for w in text.split()), default=0)
    narrowest = next((w for w in range(max(longest, (len(text) + 1) // 2), len(text) + 1)
                      if len(textwrap.wrap(text, w)) <= 2), len(text))
    for w in range(narrowest, min(narrowest + (KEEP_UNIT if keep_units else 0), len(text)) + 1):
        lines = textwrap.wrap(text, w)
        if not any(FIGURE_END.search(a) and UNIT_START.match(b)
                   for a, b in itertools.pairwise(lines)):
            return w
    return narrowest


def parted(text: str, width: int) -> bool:
    """Whether `text` wrapped at `width` (between words, as rich wraps a cell) ends a
    line with a figure and begins the next with its unit ("13.4" / "µs/call")."""
    lines = textwrap.wrap(text, width, break_on_hyphens=False)
    return any(FIGURE_END.search(a) and UNIT_START.match(b)
               for a, b in itertools.pairwise(lines))


def unit_widths(columns: list[list[str]], room: int, least: list[int]) -> list[int] | None:
    """Widths for columns of texts, at most `room` in all, where no text parts a figure
    from its unit: each column as wide as its longest text where all fit; else each at
    the widest such width up to an even share, and a column with none there at the
    narrowest above it that the others' slack pays for. None where no widths do."""
    natural = [max(map(len, texts)) for texts in columns]
    if sum(natural) <= room:
        return natural
    share = room // max(1, len(columns))
    chosen = []
    for texts, low, top in zip(columns, least, natural, strict=True):
        floor = max(low, *(len(w) for t in texts for w in t.split()))

        def whole(w: int, texts: list[str] = texts) -> bool:
            return not any(parted(t, w) for t in texts)

        chosen.append(top if top <= share else next(
            (w for w in range(share, floor - 1, -1) if whole(w)), None) or next(
            w for w in range(max(share + 1, floor), top + 1) if w == top or whole(w)))
    return chosen if sum(chosen) <= room else None


KEEP_UNIT = 12
FIGURE_END = re.compile(r"(?:^|\s)[-+]?\d[\d.,]*x?$")     # "... 15.9", "... +0.0"
UNIT_START = re.compile(r"[^\W\d]")                      # "µs/call, ...", "KiB/call"


MIN_COLUMN = 16


def colour_of(verdict: str) -> Colour | None:
    """The colour of a table cell: its verdict kind's; none for a cell with no kind
    ("not run", "unreadable", no cell)."""
    found = KINDS.get(verdict)
    return found.colour if found is not None else None


def _paint(text: str, verdict: str) -> str:
    named = colour_of(verdict)
    return f"\x1b[{ANSI[named]}m{text}\x1b[0m" if named else text

