"""report.html's overview at any size: the heatmap of rows x images coloured by verdict,
and each row's trend across images in release order (one figure per cell, with its
interval, the first bad marked), the way asv draws a benchmark over commits.

Everything here reads only the cells' results (never their samples), so the overview of
1,600 cells costs what their result.json files cost to read.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from markupsafe import Markup

from harness.analysis.kinds import LOOKS
from harness.analysis.records import human_seconds, kib
from harness.answers.search import RowAnswer
from harness.result.model import CellResult

# report.html's colour of each verdict, from the one list of verdict kinds ("not run" and
# "unreadable" are the report's pseudo-verdicts).
KIND_COLOURS: dict[str, str] = {name: look.paint for name, look in LOOKS.items()}
WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 640, 150, 74, 34, 18
TITLED = 60     # up to this many points a trend names each one on hover; past it, the first bad


@dataclass(frozen=True)
class Point:
    """One cell's figure on a row's trend: value, interval (lo..hi), its verdict."""

    value: float
    lo: float
    hi: float
    verdict: str


def step_point(res: CellResult) -> Point | None:
    """Step time per call: the median, with the early and late medians as its band. The
    median is the user's (`Summary.median_step_s`); the early and late medians are the
    measured phase's, under the quiet heap's allocator settings, so they are put in the
    user's terms (times the user's figure over the run's own, `run_step_s`): a
    `sorted(range(2000, 0, -1))` drew 28 us within a band of 65-66 us."""
    s = res.summary
    median = s.median_step_s
    if median is None:
        return None
    steps = res.steps
    if steps is None or not (steps.early_median_s > 0 and steps.late_median_s > 0):
        return Point(median, median, median, res.verdict)
    scale = median / s.run_step_s if s.user_calls and s.run_step_s else 1.0
    early, late = steps.early_median_s * scale, steps.late_median_s * scale
    return Point(median, min(early, late, median), max(early, late, median), res.verdict)


def memory_point(res: CellResult) -> Point | None:
    """Memory growth per call (KiB) of the deciding source, else heap, else USS, else
    RSS, with the slope's confidence interval."""
    order = [res.deciding_source, "heap", "uss", "rss"]
    source = next((s for s in order if s is not None and s in res.memory), None)
    if source is None:
        return None
    trend = res.memory[source]
    lo, hi = trend.slope_lo, trend.slope_hi
    if not (lo == lo and hi == hi):      # NaN: no interval
        lo = hi = trend.slope
    return Point(trend.slope / 1024, lo / 1024, hi / 1024, res.verdict)


def in_kib(value: float) -> str:
    """A figure already in KiB per call, as the charts say it ("+5.40 KiB")."""
    return f"{kib(value * 1024, 2)} KiB"


def growth_label(value: float, places: int = 2) -> str:
    """A growth per call (in KiB) on a chart: in bytes below 1 KiB, so a clean row's
    axis (a few bytes either side of 0) does not read "+0.00 KiB" at both ends."""
    if abs(value) < 1:
        return f"{kib(value * 1024 * 1024, max(places - 1, 1))} B"
    return f"{kib(value * 1024, places)} KiB"


def growth_labels(points: Sequence[Point | None]) -> Callable[[float], str]:
    """`growth_label` with the decimals that tell the chart's two axis ends apart (a
    leak of 2.09 KiB/call in every image read "+2.09 KiB" at the top and the bottom)."""
    known = [p for p in points if p is not None]
    lo = min((p.lo for p in known), default=0.0)
    hi = max((p.hi for p in known), default=0.0)
    places = 2
    while places < 6 and growth_label(lo, places) == growth_label(hi, places):
        places += 1
    return lambda value: growth_label(value, places)


def chart(title: str, labels: Sequence[str], points: Sequence[Point | None],
          first_bad: int | None, say: Callable[[float], str], zero: bool = False) -> Markup:
    """One row's trend: a point per image (coloured by verdict) with its interval as a
    vertical bar, joined in release order; the first bad image marked by a red line.
    `zero`: the axis starts at 0, so the heights compare as ratios (step times: two
    single runs 3 % apart drew from the bottom of the plot to its top)."""
    known = [p for p in points if p is not None]
    if not known:
        return Markup(f'<p class="noplot">{escape(title)}: no figures</p>')
    lo = min([p.lo for p in known] + ([0.0] if zero else []))
    hi = max(p.hi for p in known)
    if hi - lo <= abs(hi) * 1e-9:
        pad = abs(hi) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    n = max(len(labels), 2)
    plot_w, plot_h = WIDTH - LEFT - 10, HEIGHT - BOTTOM - TOP

    def x(i: int) -> float:
        return LEFT + plot_w * (i + 0.5) / n

    def y(v: float) -> float:
        return TOP + plot_h * (1 - (v - lo) / (hi - lo))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="trend" width="{WIDTH}" '
           f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
           f'aria-label="{escape(title)}">',
           f'<text x="{LEFT}" y="12" class="t">{escape(title)}</text>',
           f'<text x="{LEFT - 4}" y="{y(hi):.0f}" class="a" text-anchor="end" '
           f'dominant-baseline="hanging">{escape(say(hi))}</text>',
           f'<text x="{LEFT - 4}" y="{y(lo):.0f}" class="a" text-anchor="end">'
           f'{escape(say(lo))}</text>',
           f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - 10}" y2="{TOP + plot_h}" '
           'stroke="#999"/>']
    if lo < 0 < hi:
        out.append(f'<line x1="{LEFT}" y1="{y(0):.1f}" x2="{WIDTH - 10}" y2="{y(0):.1f}" '
                   'stroke="#ccc" stroke-dasharray="2 2"/>')
    if first_bad is not None:
        out.append(f'<line class="fb" x1="{x(first_bad):.1f}" y1="{TOP - 4}" '
                   f'x2="{x(first_bad):.1f}" y2="{TOP + plot_h}" stroke="#c00" '
                   'stroke-width="2"/>')
    step = max(1, math.ceil(n / 12))       # at most about a dozen labels along x
    for i, label in enumerate(labels):
        near = first_bad is not None and i != first_bad and abs(i - first_bad) < step
        if (i % step == 0 and not near) or i == first_bad:
            red = ' fill="#c00"' if i == first_bad else ""
            out.append(f'<text x="{x(i):.1f}" y="{HEIGHT - BOTTOM + 14}" class="a" '
                       f'text-anchor="middle"{red}>{escape(label)}</text>')
    path = " ".join(f"{'M' if k == 0 else 'L'}{x(i):.1f},{y(p.value):.1f}"
                    for k, (i, p) in enumerate((i, p) for i, p in enumerate(points)
                                               if p is not None))
    out.append(f'<path d="{path}" fill="none" stroke="#7d8bb3" stroke-width="1"/>')
    bars = " ".join(f"M{x(i):.1f},{y(p.lo):.1f}V{y(p.hi):.1f}"
                    for i, p in enumerate(points) if p is not None and p.hi > p.lo)
    if bars:
        out.append(f'<path d="{bars}" stroke="#555" stroke-width="1"/>')
    titled = len(known) <= TITLED
    dots: dict[str, list[str]] = {}
    for i, p in enumerate(points):
        if p is None:
            continue
        colour = KIND_COLOURS.get(p.verdict, "#888")
        if titled or i == first_bad:
            out.append(f'<circle cx="{x(i):.1f}" cy="{y(p.value):.1f}" r="3" '
                       f'fill="{colour}"><title>{escape(labels[i])}: {escape(say(p.value))}'
                       f' ({escape(say(p.lo))}..{escape(say(p.hi))}), {escape(p.verdict)}'
                       '</title></circle>')
        else:
            dots.setdefault(colour, []).append(f"M{x(i):.1f},{y(p.value):.1f}h0")
    # Past TITLED points, a round-capped dot per point, one path per colour: a title on
    # each took 130 bytes a point (2.6 MB of a 10,000-cell report.html)
    out.extend(f'<path class="dots" d="{" ".join(d)}" stroke="{colour}" stroke-width="6" '
               'stroke-linecap="round"/>' for colour, d in dots.items())
    out.append("</svg>")
    return Markup("".join(out))


def row_trends(row: RowAnswer, images: Sequence[str], results: dict[str, CellResult]
               ) -> list[Markup]:
    """The row's two trends across every image of the report: step time per call and
    memory growth per call."""
    by_image = {label: results.get(cid) for label, _, cid in row.cells}
    first = images.index(row.first_bad) if row.first_bad in images else None
    cells = [by_image.get(img) for img in images]
    steps = [step_point(r) if r is not None else None for r in cells]
    memory = [memory_point(r) if r is not None else None for r in cells]
    return [chart("step time per call (median; bar: early..late medians)", images, steps,
                  first, human_seconds, zero=True),
            chart("memory growth per call (bar: the slope's CI)", images, memory, first,
                  growth_labels(memory))]
