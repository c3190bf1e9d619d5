"""The console at any size: a grid of one short token per cell where words do not fit,
conclusions grouped, lines wrapped, images past the width paged as blocks. A token is a
kind's symbol and figure ("L16": leak, KiB/call), the first bad bracketed ("[L16]"), a GPU
cell run on the CPU marked "c".
"""

from __future__ import annotations

import os
import shutil
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TextIO

from harness.analysis.kinds import KINDS, LOOKS, MIN_WIDTH, SLOWDOWN, Colour
from harness.answers.search import RowAnswer
from harness.result.model import CellResult, also_slowed, also_slower, ran_on_cpu


@dataclass(frozen=True)
class Glyph:
    """How a verdict kind shows in the grid: symbol, colour (ANSI SGR code), legend word."""

    symbol: str
    colour: str
    word: str


SGR: dict[Colour, str] = {"red": "31", "green": "32", "yellow": "33", "magenta": "35",
                          "cyan": "36", "grey": "90"}
# One entry per verdict, in the legend's order, from the one list of verdict kinds.
GLYPHS: dict[str, Glyph] = {name: Glyph(look.symbol, SGR[look.colour], look.word)
                            for name, look in LOOKS.items()}
FIRST_BAD = ("[", "]")          # around the row's first bad token
CPU_MARK = "c"                  # after the token of a GPU cell that ran on the CPU
# What a kind's figure (`Kind.figure`) is, in the legend.
FIGURE_WORDS = {"memory": "KiB/call", "steps": "late/early step time",
                "baseline": "ratio vs baseline"}
DETAILS = 6                     # cells said in full words below the grid, unless --details


def figure(value: float) -> str:
    """A figure in at most four characters: 0.4, 5.9, 16, 870, 1.2k, 12k."""
    size = abs(value)
    if size < 9.95:
        return f"{value:.1f}".replace("-0.0", "0.0")
    if size < 999.5:
        return f"{value:.0f}"
    if size < 9950:
        return f"{value / 1000:.1f}k"
    return f"{value / 1000:.0f}k"


def token(verdict: str, res: CellResult | None) -> str:
    """One cell as its symbol and figure, with `CPU_MARK` where a GPU cell ran on the CPU."""
    marked = res is not None and ran_on_cpu(res)
    return _token(verdict, res) + (CPU_MARK if marked else "")


def _token(verdict: str, res: CellResult | None) -> str:
    glyph = GLYPHS.get(verdict)
    symbol = glyph.symbol if glyph is not None else verdict[:1]
    found = KINDS.get(verdict)
    if res is None or found is None:
        return symbol
    if found.figure == "memory":
        source = res.deciding_source
        slowed, slower = also_slowed(res), also_slower(res)
        also = f"+{GLYPHS['slowdown'].symbol}{figure(slowed.ratio)}" if slowed else ""
        if slower is not None:
            also += f"+{GLYPHS['regression'].symbol}{figure(slower.ratio)}"
        if source is not None and source in res.memory:
            return symbol + figure(res.memory[source].slope / 1024) + also
    if found.figure == "steps" and res.steps is not None:
        return symbol + figure(res.steps.ratio)
    if found.figure == "baseline" and res.vs_baseline is not None:
        vs = res.vs_baseline
        conf = vs.confirmation
        if conf is not None and conf.ratio == conf.ratio:    # NaN without rounds
            return symbol + figure(conf.ratio)
        # A pooled ratio is one run's, not a change: without rounds the figure is the peak.
        if vs.peak_rss is not None:
            return symbol + figure(vs.peak_rss.ratio)
    return symbol


def verdict_of(row: RowAnswer, results: dict[str, CellResult]
               ) -> dict[str, tuple[str, CellResult | None]]:
    """Image label -> (verdict, result) of the row's cells."""
    out: dict[str, tuple[str, CellResult | None]] = {}
    for label, said, cid in row.cells:
        res = results.get(cid)
        out[label] = (res.verdict if res is not None else said, res)
    return out


def wrap(text: str, width: int, indent: str = "", more: str = "  ") -> list[str]:
    """`text` wrapped at `width` (long words broken at slashes), continuations indented."""
    out: list[str] = []
    for line in text.split("\n"):
        lead = line[: len(line) - len(line.lstrip(" "))]
        first = indent + lead
        rest = first + more
        room = max(8, width - len(rest))
        words = [piece for word in line.split() for piece in _pieces(word, room)]
        wrapper = textwrap.TextWrapper(width=max(len(rest) + 8, width), initial_indent=first,
                                       subsequent_indent=rest, break_long_words=True,
                                       break_on_hyphens=False)
        out.extend(wrapper.wrap(" ".join(words)) or [first.rstrip()])
    return out


def pack(items: list[str], width: int, gap: str = "   ") -> list[str]:
    """Items on lines of at most `width`, `gap` apart, split only if longer than a line."""
    out: list[str] = []
    line = ""
    for item in items:
        if line and len(line) + len(gap) + len(item) <= width:
            line += gap + item
            continue
        if line:
            out.append(line)
        indent = "  " if out else ""
        if len(indent + item) <= width:
            line = indent + item
            continue
        # Longer than a line: wrapped on lines of its own, the next item on a new line.
        out.extend(wrap(item, width, indent))
        line = ""
    if line:
        out.append(line)
    return out


def console_width(out: TextIO, width: int | None = None) -> int | None:
    """The console's width: --width, the terminal's, or `COLUMNS`; None when piped."""
    if width is None and out.isatty():
        width = shutil.get_terminal_size((100, 24)).columns
    elif width is None and os.environ.get("COLUMNS", "").strip().isdigit():
        # Piped, but the caller said how wide (CI logs, `COLUMNS=100 harness ... | less`).
        width = max(MIN_WIDTH, int(os.environ["COLUMNS"]))
    return width


def say(out: TextIO, text: str, width: int | None) -> None:
    """`text` on `out`, its lines wrapped at `width` (as they are without one)."""
    lines = wrap(text, width) if width is not None else text.split("\n")
    out.write("".join(line + "\n" for line in lines))


def _pieces(word: str, room: int) -> Iterator[str]:
    """A word that fits as it is; a longer one cut after slashes into pieces that do."""
    while len(word) > room:
        cut = word.rfind("/", 0, room)
        if cut <= 0:
            break
        yield word[: cut + 1]
        word = word[cut + 1:]
    yield word


@dataclass
class Grid:
    """The grid of a report's rows x images, laid out at `width`."""

    images: list[str]
    rows: list[RowAnswer]
    results: dict[str, CellResult]
    width: int
    colour: bool = False

    def cells(self) -> list[list[str]]:
        """Each row's tokens, in image order (the first bad bracketed)."""
        body = []
        for row in self.rows:
            said = verdict_of(row, self.results)
            line = []
            for img in self.images:
                verdict, res = said.get(img, ("", None))
                tok = token(verdict, res) if verdict else " "
                if img == row.first_bad:
                    tok = FIRST_BAD[0] + tok + FIRST_BAD[1]
                line.append(tok)
            body.append(line)
        return body

    def lines(self) -> list[str]:
        tokens = self.cells()
        verdicts = [verdict_of(row, self.results) for row in self.rows]
        names = [row.row for row in self.rows]
        name_w = min(max((len(n) for n in names), default=3), max(8, self.width // 3))
        widths = [max([_longest_word(img)] + [len(t[i]) for t in tokens])
                  for i, img in enumerate(self.images)]
        blocks = self._blocks(widths, name_w)
        out: list[str] = []
        for b, (start, stop) in enumerate(blocks):
            if b > 0:
                out.append("")      # a block of the images that did not fit beside
            heads = [_head_lines(self.images[i], widths[i]) for i in range(start, stop)]
            depth = max(len(h) for h in heads)
            for k in range(depth):
                parts = [" " * name_w if k < depth - 1 else "row".ljust(name_w)]
                for h, i in zip(heads, range(start, stop), strict=True):
                    pad = depth - len(h)   # headers sit on the line above the cells
                    parts.append((h[k - pad] if k >= pad else "").ljust(widths[i]))
                out.append(" ".join(parts).rstrip())
            for name, toks, said in zip(names, tokens, verdicts, strict=True):
                parts = [_fit(name, name_w)]
                for i in range(start, stop):
                    parts.append(self._paint(toks[i].ljust(widths[i]),
                                             said.get(self.images[i], ("", None))[0]))
                out.append(" ".join(parts).rstrip())
        return out

    def legend(self) -> list[str]:
        """The symbols the grid uses, in words (only those it shows, and the mark)."""
        shown = {verdict for said in (verdict_of(r, self.results) for r in self.rows)
                 for verdict, _ in said.values()}
        parts = [f"{g.symbol} {g.word}" for kind, g in GLYPHS.items() if kind in shown]
        if any(row.first_bad for row in self.rows):
            parts.append(f"{FIRST_BAD[0]}{FIRST_BAD[1]} first bad")
        if any(res is not None and ran_on_cpu(res) for said in
               (verdict_of(r, self.results) for r in self.rows) for _, res in said.values()):
            parts.append(f"{CPU_MARK} ran on the CPU (a GPU cell)")
        figures = self._figures()
        if figures:
            parts.append(figures)
        return pack(["legend:", *parts], self.width)

    def _figures(self) -> str:
        """What the figures beside the symbols are, for those the grid shows only."""
        symbols: dict[str, list[str]] = {kind: [] for kind in FIGURE_WORDS}
        beside: dict[str, str] = {}     # after a memory figure: a slowdown's, a regression's
        for row in self.rows:
            for verdict, res in verdict_of(row, self.results).values():
                glyph, found = GLYPHS.get(verdict), KINDS.get(verdict)
                if glyph is None or found is None or found.figure not in symbols:
                    continue
                shown = _token(verdict, res)
                if shown != glyph.symbol and glyph.symbol not in symbols[found.figure]:
                    symbols[found.figure].append(glyph.symbol)
                for kind in (SLOWDOWN, "regression"):     # `_token`'s suffixes
                    if f"+{GLYPHS[kind].symbol}" in shown:
                        beside[GLYPHS[kind].symbol] = FIGURE_WORDS[KINDS[kind].figure]
        said = [f"{FIGURE_WORDS[f]} ({', '.join(s)})" for f, s in symbols.items() if s]
        said += [f"+{symbol} after it: {words}" for symbol, words in beside.items()]
        return f"figures: {'; '.join(said)}" if said else ""

    def _blocks(self, widths: list[int], name_w: int) -> list[tuple[int, int]]:
        """(start, stop) of each block of images that fits: as few, as even, as fit."""
        greedy = list(self._greedy(widths, name_w))
        size = -(-len(widths) // len(greedy))
        even = [(k, min(k + size, len(widths))) for k in range(0, len(widths), size)]
        if len(even) == len(greedy) and all(
                name_w + sum(1 + w for w in widths[a:b]) <= self.width for a, b in even):
            return even
        return greedy

    def _greedy(self, widths: list[int], name_w: int) -> Iterator[tuple[int, int]]:
        start = 0
        while start < len(widths):
            used, stop = name_w, start
            while stop < len(widths) and (used + 1 + widths[stop] <= self.width
                                          or stop == start):
                used += 1 + widths[stop]
                stop += 1
            yield start, stop
            start = stop

    def _paint(self, text: str, verdict: str) -> str:
        glyph = GLYPHS.get(verdict)
        if not self.colour or glyph is None:
            return text
        return f"\x1b[{glyph.colour}m{text}\x1b[0m"


def _longest_word(text: str) -> int:
    return max((len(w) for w in text.split()), default=1)


def _head_lines(text: str, width: int) -> list[str]:
    """A header on as many lines as its words need at `width` (never inside a word)."""
    return textwrap.wrap(text, width, break_long_words=False) or [""]


def _fit(name: str, width: int) -> str:
    """A row's name in `width` columns: cut in the middle with "…" when longer."""
    if len(name) <= width:
        return name.ljust(width)
    keep = width - 1
    return name[: (keep + 1) // 2] + "…" + name[len(name) - keep // 2:]


def conclusions(rows: list[RowAnswer], width: int, diff_lines: int = 15,
                named: bool = False) -> list[str]:
    """Rows with the same answer said once, with the images' differences, rows named."""
    groups: dict[tuple[str, tuple[tuple[str, str, str], ...]], list[RowAnswer]] = {}
    for row in rows:
        groups.setdefault((row.sentence, tuple(row.diff)), []).append(row)
    ordered = sorted(groups.values(), key=lambda g: -len(g))
    out: list[str] = []
    for k, group in enumerate(ordered):
        head = group[0]
        n = len(group)
        if n == 1:
            out.extend(wrap(f"{head.row}: {head.sentence}", width))
        else:
            out.extend(wrap(f"{n} rows: {head.sentence}", width))
            if named or (n < len(rows) and (k > 0 or n <= 8)):
                out.extend(wrap(", ".join(r.row for r in group), width, "  "))
        if head.first_bad or head.scenario_error:
            for what, good, bad in head.diff[:diff_lines]:
                out.extend(wrap(f"{what}: {good} -> {bad}", width, "  "))
            if len(head.diff) > diff_lines:
                out.extend(wrap(f"... {len(head.diff) - diff_lines} more differences in "
                                "report.md", width, "  "))
    return out


def runs(rows: list[RowAnswer], images: list[str], results: dict[str, CellResult],
         width: int) -> list[str]:
    """A sweep too large for a screen: a block per answer, each pattern of rows as runs
    of one verdict ("20.01-25.06 ·x66, [25.07 L16], 25.08-28.04 L16x33")."""
    groups: dict[tuple[str, tuple[tuple[str, str, str], ...]], list[RowAnswer]] = {}
    for row in rows:
        groups.setdefault((row.sentence, tuple(row.diff)), []).append(row)
    out: list[str] = []
    for group in sorted(groups.values(), key=lambda g: -len(g)):
        if out:
            out.append("")
        out.extend(conclusions(group, width, named=True))
        patterns: dict[tuple[tuple[str, int, int, bool], ...], list[tuple[RowAnswer,
                                                                          list[set[str]]]]] = {}
        for row in group:
            spans, tokens = _spans(row, images, results)
            patterns.setdefault(spans, []).append((row, tokens))
        for spans, found in patterns.items():
            names = (found[0][0].row if len(found) == 1 else
                     f"all {len(found)} rows" if len(found) == len(group) else
                     f"{found[0][0].row} … {found[-1][0].row} ({len(found)} rows)")
            said = []
            for k, (verdict, start, stop, first) in enumerate(spans):
                shown = set().union(*(tokens[k] for _, tokens in found))
                tok = (shown.pop() if len(shown) == 1 else
                       f"{GLYPHS[verdict].symbol if verdict in GLYPHS else verdict[:1]}"
                       f"({len(shown)} figures)")
                where = images[start] if stop == start else f"{images[start]}-{images[stop]}"
                count = f"x{stop - start + 1}" if stop > start else ""
                said.append(f"[{where} {tok}]" if first else f"{where} {tok}{count}")
            out.extend(wrap(f"{names}: " + ", ".join(said), width, "  "))
    return out


def _spans(row: RowAnswer, images: list[str], results: dict[str, CellResult]
           ) -> tuple[tuple[tuple[str, int, int, bool], ...], list[set[str]]]:
    """The row's runs of one verdict (verdict, first, last, is first bad) and their tokens."""
    said = verdict_of(row, results)
    spans: list[tuple[str, int, int, bool]] = []
    tokens: list[set[str]] = []
    for i, img in enumerate(images):
        verdict, res = said.get(img, ("", None))
        if not verdict:
            continue
        first = img == row.first_bad
        tok = token(verdict, res)
        last = spans[-1] if spans else None
        if (last is not None and not first and not last[3] and last[0] == verdict
                and last[2] == i - 1):
            spans[-1] = (verdict, last[1], i, False)
            tokens[-1].add(tok)
        else:
            spans.append((verdict, i, i, first))
            tokens.append({tok})
    return tuple(spans), tokens


ANSI: dict[Colour, str] = {"red": "31", "green": "32", "yellow": "33", "magenta": "35",
                           "cyan": "36", "grey": "90"}
STYLES: dict[Colour, str] = {"red": "red", "green": "green", "yellow": "yellow",
                             "magenta": "magenta", "cyan": "cyan", "grey": "bright_black"}


def colour_of(verdict: str) -> Colour | None:
    """The colour of a table cell: its verdict kind's; none for a cell with no kind."""
    found = KINDS.get(verdict)
    return found.colour if found is not None else None
