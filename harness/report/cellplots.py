"""The plots of a cell's page in report.html: each memory source against iteration with
its fitted slope, and step time with the row's baseline overlaid, on one y scale per
source across a row (`RowScales`). Drawn by `harness.report.svg`, which escapes its own
text, so each plot is `Markup`.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field

from markupsafe import Markup

from harness.analysis.records import (
    MemoryTrend,
    StepTrend,
    human_seconds,
    per_call,
    rate_text,
    scaled,
)
from harness.protocol.series import TREND_NAMES, Series, readings, step_times
from harness.report.svg import Fit, Line, chart, robust_range
from harness.runtimes.base import own_cgroup

COLOURS = {"heap": "#1f77b4", "uss": "#2ca02c", "rss": "#9467bd", "cgroup": "#8c564b",
           "gpu": "#ff7f0e", "fw": "#17becf", "kids": "#e377c2", "step": "#2c3e70",
           "baseline": "#999999"}
MIN_POINTS = 3                  # a source needs this many measured samples for a panel
MIN_SPAN = {"heap": 256 * 1024.0}   # bytes: below this, a row's heap span is noise
DEFAULT_MIN_SPAN = 1024 * 1024.0


def warmup_end(series: Series) -> float | None:
    ends = [float(s["i"]) for s in series.samples if s.get("phase") == "warmup"]
    return max(ends) if ends else None


def measured(series: Series, key: str) -> list[float]:
    return [float(v) for smp in series.samples if smp.get("phase") == "measure"
            and (v := smp.get(key)) is not None]


def memory_plot(series: Series, key: str, name: str, trend: MemoryTrend | None,
                span: float | None = None, fitted: bool = True) -> Markup:
    """Bytes of one source against iteration, every phase, with the fitted slope.

    With `span`, the y axis is that many bytes tall (the largest range of this source
    in the row), from this cell's lowest measured value: a 30 KiB drift next to a
    1.7 MiB leak looks like one. The slope is printed large either way."""
    pairs = sorted((float(s["i"]), float(s[key])) for s in series.samples
                   if s.get(key) is not None)
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    fit, note, headline = None, "", ""
    if trend is not None and trend.kind == "insufficient":
        note = f"no readings to fit ({trend.n})"     # never "+0.0 KiB/call"
    elif trend is not None and fitted:
        slope = trend.slope
        mx, my = readings(series.samples, key)
        if len(mx):
            # Theil-Sen's intercept: the median offset of the points from the slope.
            intercept = statistics.median(float(y) - slope * float(x)
                                          for x, y in zip(mx, my, strict=True))
            fit = Fit(slope, intercept, float(mx[0]), float(mx[-1]))
        lo, hi = trend.slope_lo, trend.slope_hi
        unit, scale = per_call(slope)
        ci = (f"CI {scaled(lo, scale, 2)}..{scaled(hi, scale, 2)} {unit}/call, "
              if lo == lo and hi == hi else "")  # not NaN
        headline = rate_text(slope, 2)
        note = f"{ci}{trend.kind}"
    elif not fitted:
        note = "never decisive"
    y_range = None
    values = measured(series, key) or ys
    if span is not None and values:
        low = min(values)
        # bytes are never below zero: the axis starts at 0 at the lowest (a worker panel
        # whose USS began near 0 drew from -9 MiB, issue 87)
        y_range = (max(0.0, low - span * 0.08) if low >= 0 else low - span * 0.08,
                   low + span * 1.08)
    line = Line(xs, ys, COLOURS.get(name, "#333"), name)
    return chart(name, [line], "B", warmup_end(series), fit, note, y_range, headline)


def step_points(series: Series) -> tuple[list[float], list[float]]:
    xs: list[float] = []
    ys: list[float] = []
    for s in series.samples:
        if s.get("src") == "step":
            dt = s["dt"]
            first = int(s["i"]) - len(dt) + 1
            xs.extend(float(first + k) for k in range(len(dt)))
            ys.extend(dt)
    return xs, ys


def step_plot(series: Series, steps: StepTrend | None,
              y_range: tuple[float, float] | None = None,
              baseline: tuple[str, Series] | None = None) -> Markup:
    """Seconds per step against iteration, warm-up included and shaded but not scaling
    the axis; the row's baseline image overlaid (dashed grey) where the cell is compared."""
    xs, ys = step_points(series)
    lines = [Line(xs, ys, COLOURS["step"], "this image")]
    if baseline is not None:
        bx, by = step_points(baseline[1])
        if bx:
            lines.append(Line(bx, by, COLOURS["baseline"], f"baseline {baseline[0]}",
                              dashed=True))
    note = ""
    if steps is not None:
        note = f"late/early {steps.ratio:.2f}x, p={steps.p_value:.2g}"
    times = step_times(series.samples)
    headline = ""
    if times:
        # The trace is the measured phase's, timed under the quiet heap's allocator where
        # the figure the tables print is the user's (a sort: 64 us here, 29 us there).
        quiet = series.as_user() is not None and (series.header or {}).get(
            "heap_mode") == "quiet"
        headline = (f"{'quiet-heap ' if quiet else ''}median "
                    f"{human_seconds(statistics.median(times))}")
    if y_range is None:
        y_range = robust_range(times or ys)
    return chart("step time", lines, "s", warmup_end(series), None, note, y_range, headline)


@dataclass
class RowScales:
    """One y scale per source across a row: the memory span and the step-time range."""

    spans: dict[str, float] = field(default_factory=dict)
    steps: tuple[float, float] | None = None


def row_scales(series: Mapping[str, Series], sources: list[tuple[str, str]]) -> RowScales:
    out = RowScales()
    for key, name in sources:
        spans = []
        for one in series.values():
            values = measured(one, key)
            if len(values) >= MIN_POINTS:
                spans.append(max(values) - min(values))
        if spans:
            out.spans[key] = max(max(spans), MIN_SPAN.get(name, DEFAULT_MIN_SPAN))
    ranges = [robust_range(times) for one in series.values()
              if (times := step_times(one.samples))]
    if ranges:
        out.steps = (max(0.0, min(r[0] for r in ranges)), max(r[1] for r in ranges))
    return out


def sources_of(series: Series, runtime: str) -> list[tuple[str, str]]:
    """The memory sources with data in the measured phase (USS read only during import
    has no panel); a cell without a cgroup of its own (the local runtime: the agent reads
    the session's or machine's) has no cgroup panel either."""
    return [(key, name) for key, name in TREND_NAMES.items()
            if len(measured(series, key)) >= MIN_POINTS
            and not (name == "cgroup" and not own_cgroup(runtime))]
