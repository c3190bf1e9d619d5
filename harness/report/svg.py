"""Small inline SVG line charts, drawn in Python so report.html works offline.

No plotting library and no CDN: a chart is a string of SVG with every piece of text
escaped here, handed to the template as `Markup`. Long series are reduced to the
min and max of each bucket, so a spike survives the reduction and a page with many
cells stays small.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from markupsafe import Markup

WIDTH, HEIGHT = 340, 150
LEFT, RIGHT, TOP, BOTTOM = 70, 10, 32, 24
MAX_POINTS = 400
FIT_COLOUR = "#d62728"


@dataclass(frozen=True)
class Line:
    xs: Sequence[float]
    ys: Sequence[float]
    colour: str
    label: str
    dashed: bool = False


@dataclass(frozen=True)
class Fit:
    """y = slope * x + intercept over [x0, x1], drawn dashed over the data."""

    slope: float
    intercept: float
    x0: float
    x1: float


def reduce(xs: Sequence[float], ys: Sequence[float], limit: int = MAX_POINTS
           ) -> tuple[list[float], list[float]]:
    """At most about `limit` points: per bucket, the lowest and highest y in x order."""
    if len(xs) <= limit:
        return list(xs), list(ys)
    size = -(-2 * len(xs) // limit)
    out_x: list[float] = []
    out_y: list[float] = []
    for start in range(0, len(xs), size):
        idx = range(start, min(start + size, len(xs)))
        lo = min(idx, key=lambda i: ys[i])
        hi = max(idx, key=lambda i: ys[i])
        for i in sorted({lo, hi}):
            out_x.append(xs[i])
            out_y.append(ys[i])
    return out_x, out_y


def human(value: float, unit: str, span: float = 0.0) -> str:
    """A tick label: bytes as KiB/MiB/GiB, seconds as ms/us.

    Enough decimals that ticks `span` apart read differently: a flat 95 MiB heap
    with 100 bytes of noise must not show three identical labels.
    """
    scales = {"B": (("GiB", 1024.0**3), ("MiB", 1024.0**2), ("KiB", 1024.0), ("B", 1.0)),
              "s": (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))}.get(unit)
    if scales is None:
        return f"{value:.4g}"
    name, scale = next(((n, f) for n, f in scales if abs(value) >= f), scales[-1])
    step = span / 2 / scale if span > 0 else 1.0
    decimals = min(6, max(0, 1 - math.floor(math.log10(step)))) if step < 10 else 0
    return f"{value / scale:.{decimals}f} {name}"


def robust_range(ys: Sequence[float], lo_q: float = 0.01, hi_q: float = 0.98
                 ) -> tuple[float, float]:
    """The [lo_q, hi_q] quantiles of ys, widened by a quarter of their spread and never
    below 0 for values that are never negative (times): one slow warm-up step (40 ms
    against 0.3 ms), or the top 2 % of spikes, must not flatten the rest of the plot;
    what is left out is counted on the chart."""
    if not ys:
        return 0.0, 1.0
    v = sorted(ys)
    lo = v[int(lo_q * (len(v) - 1))]
    hi = v[math.ceil(hi_q * (len(v) - 1))]
    spread = hi - lo or abs(hi) * 0.05 or 1.0
    low = lo - spread * 0.25
    return (max(0.0, low) if v[0] >= 0 else low), hi + spread * 0.25


@dataclass(frozen=True)
class Axes:
    """A chart's data ranges and plot area: where a value is drawn."""

    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float
    w: float = WIDTH - LEFT - RIGHT
    h: float = HEIGHT - TOP - BOTTOM

    def px(self, x: float) -> float:
        return LEFT + (x - self.x_lo) / (self.x_hi - self.x_lo) * self.w

    def py(self, y: float) -> float:
        return TOP + (1 - (y - self.y_lo) / (self.y_hi - self.y_lo)) * self.h


def chart(title: str, lines: Sequence[Line], unit: str, warmup_end: float | None = None,
          fit: Fit | None = None, note: str = "", y_range: tuple[float, float] | None = None,
          headline: str = "") -> Markup:
    """One chart: the lines against iteration, warm-up shaded, fitted slope dashed.

    `y_range` fixes the y axis (shared across a row, or robust to warm-up outliers);
    points outside it are drawn at the edge and counted in a note. `headline` is
    printed large (the slope), so two charts compare by number whatever their scale."""
    points = [(x, y) for ln in lines for x, y in zip(ln.xs, ln.ys, strict=True)]
    if not points:
        return Markup(f'<p class="noplot">{escape(title)}: no samples</p>')
    ax = axes(points, y_range, fit)
    clipped = ([p for p in points if p[1] > ax.y_hi or p[1] < ax.y_lo]
               if y_range is not None else [])
    parts = [*frame(title, ax), *warmup(ax, warmup_end), *ticks(ax, unit),
             *series(lines, ax), *legend(lines), *clipped_note(clipped, ax, warmup_end, unit),
             *fit_line(fit, ax), *labels(title, headline, note, ax)]
    return Markup("".join(parts))


def axes(points: Sequence[tuple[float, float]], y_range: tuple[float, float] | None,
         fit: Fit | None) -> Axes:
    """The ranges: x from 0 (or the least x) to the last point; y as `y_range` fixes
    it, else the points' and the fitted line's, padded 5 %."""
    x_lo = min(0.0, min(p[0] for p in points))
    x_hi = max(p[0] for p in points)
    if y_range is not None:
        y_lo, y_hi = y_range
    else:
        y_lo = min(p[1] for p in points)
        y_hi = max(p[1] for p in points)
        if fit is not None:
            for x in (fit.x0, fit.x1):
                y = fit.slope * x + fit.intercept
                y_lo, y_hi = min(y_lo, y), max(y_hi, y)
    if y_hi - y_lo < 1e-12 * max(1.0, abs(y_hi)):
        y_lo, y_hi = y_lo - 1, y_hi + 1
    if y_range is None:
        pad = (y_hi - y_lo) * 0.05
        y_lo, y_hi = y_lo - pad, y_hi + pad
    return Axes(x_lo, x_hi if x_hi > x_lo else x_lo + 1, y_lo, y_hi)


def frame(title: str, ax: Axes) -> list[str]:
    """The svg element and the plot area's white box."""
    return [f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" width="{WIDTH}" '
            f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
            f'aria-label="{escape(title)}">',
            f'<title>{escape(title)}</title>',
            f'<rect x="{LEFT}" y="{TOP}" width="{ax.w}" height="{ax.h}" fill="#fff" '
            'stroke="#bbb"/>']


def warmup(ax: Axes, warmup_end: float | None) -> list[str]:
    """The warm-up shaded, with its label."""
    if warmup_end is None or warmup_end <= ax.x_lo:
        return []
    end = ax.px(min(warmup_end, ax.x_hi))
    return [f'<rect class="warmup" x="{LEFT}" y="{TOP}" width="{end - LEFT:.1f}" '
            f'height="{ax.h}" fill="#e8e8e8"><title>warm-up (iterations up to '
            f'{warmup_end:.0f})</title></rect>',
            f'<text x="{LEFT + 3}" y="{TOP + ax.h - 4}" font-size="9" '
            'fill="#777">warm-up</text>']


def ticks(ax: Axes, unit: str) -> list[str]:
    """Three labels on each axis: low, middle, high."""
    parts = []
    for frac in (0.0, 0.5, 1.0):
        y = ax.y_lo + frac * (ax.y_hi - ax.y_lo)
        parts.append(f'<text x="{LEFT - 4}" y="{ax.py(y) + 3:.1f}" font-size="9" '
                     f'text-anchor="end" fill="#444">'
                     f'{escape(human(y, unit, ax.y_hi - ax.y_lo))}</text>')
        x = ax.x_lo + frac * (ax.x_hi - ax.x_lo)
        parts.append(f'<text x="{ax.px(x):.1f}" y="{HEIGHT - 8}" font-size="9" '
                     f'text-anchor="middle" fill="#444">{x:.0f}</text>')
    return parts


def series(lines: Sequence[Line], ax: Axes) -> list[str]:
    """Each line as a polyline (reduced), a point off the y axis drawn on its edge."""
    parts = []
    x_lo, y_lo, y_hi, w, h = ax.x_lo, ax.y_lo, ax.y_hi, ax.w, ax.h
    dx, dy = ax.x_hi - x_lo, y_hi - y_lo
    for ln in lines:
        xs, ys = reduce(ln.xs, ln.ys)
        # px and py written out (the same arithmetic): a page of 1,600 cells draws
        # ~350,000 points
        path = " ".join(
            f"{LEFT + (x - x_lo) / dx * w:.1f},"
            f"{TOP + (1 - ((y_lo if y < y_lo else y_hi if y > y_hi else y) - y_lo) / dy) * h:.1f}"
            for x, y in zip(xs, ys, strict=True))
        dash = ' stroke-dasharray="3,2"' if ln.dashed else ""
        parts.append(f'<polyline class="series" fill="none" stroke="{escape(ln.colour)}" '
                     f'stroke-width="1.2"{dash} points="{path}"><title>{escape(ln.label)}'
                     '</title></polyline>')
    return parts


def legend(lines: Sequence[Line]) -> list[str]:
    """The lines' names in their colours, where there are several: under the axis,
    left of "iteration", never over the trace."""
    if len(lines) <= 1:
        return []
    said = " · ".join(ln.label for ln in lines)
    return [f'<text class="legend" x="2" y="{HEIGHT - 0.5}" font-size="8" fill="#555">'
            + "".join(f'<tspan fill="{escape(ln.colour)}">{escape(ln.label)}'
                      f'{" · " if k < len(lines) - 1 else ""}</tspan>'
                      for k, ln in enumerate(lines))
            + f'<title>{escape(said)}</title></text>']


def clipped_note(clipped: Sequence[tuple[float, float]], ax: Axes, warmup_end: float | None,
                 unit: str) -> list[str]:
    """Points off the axis are drawn on its edge; how many, how far and whether they
    are warm-up, said above the plot, never over the trace."""
    said = []
    for side, off in (("above", [p for p in clipped if p[1] > ax.y_hi]),
                      ("below", [p for p in clipped if p[1] < ax.y_lo])):
        if not off:
            continue
        warm = sum(1 for x, _ in off if warmup_end is not None and x <= warmup_end)
        far = max(y for _, y in off) if side == "above" else min(y for _, y in off)
        said.append(f"{len(off)}{' warm-up' if warm == len(off) else ''} {side} "
                    f"({'max' if side == 'above' else 'min'} {human(far, unit, 0)})")
    if not said:
        return []
    return [f'<text class="clipped" x="{LEFT}" y="{TOP - 4}" font-size="8" '
            f'fill="#a40">{escape("; ".join(said))}<title>samples off the axis, '
            'drawn on its edge</title></text>']


def fit_line(fit: Fit | None, ax: Axes) -> list[str]:
    """The fitted slope, dashed."""
    if fit is None:
        return []
    return [f'<line class="fit" x1="{ax.px(fit.x0):.1f}" '
            f'y1="{ax.py(fit.slope * fit.x0 + fit.intercept):.1f}" '
            f'x2="{ax.px(fit.x1):.1f}" y2="{ax.py(fit.slope * fit.x1 + fit.intercept):.1f}" '
            f'stroke="{FIT_COLOUR}" stroke-width="1.5" stroke-dasharray="5,3">'
            '<title>fitted slope (Theil-Sen, after warm-up)</title></line>']


def labels(title: str, headline: str, note: str, ax: Axes) -> list[str]:
    """The title, the headline (large, right), the note (above the plot, right: never
    over the trace, the title or the axis labels), the x axis's name; the svg closed."""
    parts = [f'<text x="{LEFT}" y="{TOP - 17}" font-size="11" font-weight="bold" '
             f'fill="#222">{escape(title)}</text>']
    if headline:
        parts.append(f'<text class="headline" x="{WIDTH - RIGHT}" y="{TOP - 16}" '
                     f'font-size="12" font-weight="bold" text-anchor="end" fill="#222">'
                     f'{escape(headline)}</text>')
    if note:
        parts.append(f'<text class="note" x="{WIDTH - RIGHT}" y="{TOP - 4}" font-size="8" '
                     f'text-anchor="end" fill="#555">{escape(note)}</text>')
    parts.append(f'<text x="{LEFT + ax.w / 2:.0f}" y="{HEIGHT - 0.5}" font-size="8" '
                 'text-anchor="middle" fill="#777">iteration</text></svg>')
    return parts
