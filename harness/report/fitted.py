"""The console's table fitted to a known width, drawn by rich: images across where full
words fit, else images down, else the grid. Its own module so a table for a pipe
(`report.console`) loads no rich."""

from __future__ import annotations

import itertools
import re
import textwrap
from typing import TextIO

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness.report.grid import STYLES, Grid, colour_of
from harness.report.model import Report


def fitted_table(report: Report, out: TextIO, width: int, colour: bool) -> bool:
    """The table where full words fit, else the grid; True when it drew the grid."""
    console = Console(file=out, width=width, no_color=not colour, force_terminal=colour,
                      highlight=False, emoji=False)
    header, body = report.table()
    verdicts = report.table_verdicts()
    images = header[1:-1]

    def text(value: str, verdict: str) -> Text:
        named = colour_of(verdict)
        return Text(value, style=STYLES[named] if colour and named else "")

    # One column per image, each wide enough for its name and a wrapped verdict.
    widths = [min(max(MIN_COLUMN, len(h)), 28) for h in images]
    row_width = min(max(len(r[0]) for r in body), 30) if body else 10
    # Row names and answers keep their widths (rich would cut them mid-word); the
    # images' columns give way, wrapping at spaces.
    answers = [r[-1] for r in body] + [header[-1]]
    longest = max((len(w) for a in answers for w in a.split()), default=0)
    room = width - row_width - sum(w + 3 for w in widths) - 3
    rows = [r[0] for r in body]
    image_w = max((len(i) for i in images), default=5)
    whole = [max(len(name), *(len(r[1 + i]) for i in range(len(images))))
             for name, r in zip(rows, body, strict=True)]
    if room >= max(MIN_COLUMN, longest):
        answer_w = min(room, max(MIN_COLUMN, longest, *(two_lines(a) for a in answers)))
        # The images' columns share what is left, keeping figures beside their units;
        # where no widths do that and images down fit, images go down.
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
    # Too many images: images down, rows across, a cell's words on one line or two.
    # Where even half of each cell's words does not fit, the grid.
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
        grid = Grid(images, report.rows, report.results, width, colour)
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
    for answer, r in zip(report.rows, body, strict=True):
        if not (answer.first_bad or answer.scenario_error):   # those are said below
            console.print(f"{r[0]}: {r[-1]}", markup=False)
    return False


def two_lines(text: str, keep_units: bool = True) -> int:
    """The narrowest column that holds `text` in two lines, keeping a figure beside its
    unit (`keep_units`) where up to `KEEP_UNIT` columns wider does."""
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
    """Whether `text` wrapped at `width` splits a figure from its unit ("13.4" / "µs/call")."""
    lines = textwrap.wrap(text, width, break_on_hyphens=False)
    return any(FIGURE_END.search(a) and UNIT_START.match(b)
               for a, b in itertools.pairwise(lines))


def unit_widths(columns: list[list[str]], room: int, least: list[int]) -> list[int] | None:
    """Column widths within `room` that split no figure from its unit, or None."""
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
