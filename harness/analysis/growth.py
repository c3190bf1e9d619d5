"""Within-run trends: memory growth per source and step-time slowdown.

Memory: Theil-Sen slopes over the whole measured span and over the late window (the
last third by default), each with Sen's confidence interval, decide between

- leak: the slope interval is above zero, the growth over the span passes the floor,
  and the late interval's lower bound, kept up over the span, passes it too;
- plateau: it grew (trend above, or end-minus-start rise over the floor), but the late
  slope's upper bound is below `stall_fraction` of the mean rate of rise, or would not
  pass the floor over the span (an arena, cache or buffer that filled and stopped);
- stable: neither trend nor rise passes the floor, nor does it creep (below);
- ambiguous, creeping: under both floors, yet steady: the slope's interval above
  `ok_floor_bytes` and the late third keeping its rate (`creeping`). A small leak over a
  short run looks so, and so does a small cache still filling; neither is `ok`, and the
  cell runs again long enough for the growth to pass the floor (`creep_rerun`);
- ambiguous: anything else, e.g. a late window too noisy to tell "still growing" from
  "stopped"; a longer or repeated run decides;
- insufficient: fewer than `min_samples` samples.

A leak must also be growth that a filling cache cannot explain (`fill.fill_check`, the one
rule the live decider in `sequential` applies too): over a short run a cache, arena or
plan pool still filling, A (1 - exp(-t / tau)), grows like a leak. The first and last
thirds of the run (from where the growth started) give a lower bound on how much the
rate fell, and so the smallest fill that fits the data; where that fill is no larger
than `cfg.fill_share` of the source's level (at most `cfg.fill_bytes`) the source is
`ambiguous`, and the cell runs again, longer, until the growth is too straight for any
fill of that size or it levels off.

The floor is the largest of the configured floors, `noise_multiple` times the noise
band and `drawdown_multiple` times the largest fall from an earlier high. Sen's
interval assumes independent errors, but memory samples are autocorrelated (GC
sawtooth, allocator level shifts); the variance of Kendall's S is therefore scaled by
(1 + r) / (1 - r), r the lag-1 autocorrelation of the detrended residuals (the AR(1)
effective-sample-size correction of Yue and Wang, 2004).

Step time: the early and late windows (a quarter each by default) are compared with a
one-sided Mann-Whitney U test and the ratio of medians; ranks and medians shrug off a
slow first iteration or a few GC pauses.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import numpy as np

from harness.analysis.fill import Fill, drawdown, fill_check
from harness.analysis.ranktests import kendall_increasing_p, mannwhitneyu_p
from harness.analysis.records import Finding
from harness.analysis.slopes import (
    FloatArray,
    SlopeFit,
    bin_medians,
    theil_sen,
)
from harness.analysis.trends import MemoryKind, MemoryTrend, StepTrend
from harness.thresholds import AnalysisConfig

# Fewer points than this in the late window give a meaningless interval.
_MIN_LATE_POINTS = 4


NEAR_FLOOR_MULTIPLE = 2.0   # growth under this many floors ...
NEAR_FLOOR_DECAY = 0.9      # ... with the late slope under this share of the whole one
def memory_trend(
    source: str, iters: FloatArray, values: FloatArray, cfg: AnalysisConfig
) -> MemoryTrend:
    """Classify the trend of one memory source after warm-up (`trend_and_fill`'s trend)."""
    return trend_and_fill(source, iters, values, cfg)[0]


def trend_and_fill(
    source: str, iters: FloatArray, values: FloatArray, cfg: AnalysisConfig,
    min_samples: int | None = None, per_call: bool = True,
    creep_calls: float = math.inf,
) -> tuple[MemoryTrend, Fill | None]:
    """Classify the trend of one memory source after warm-up.

    Series longer than `cfg.max_points` are binned to that many medians of consecutive
    samples (deterministic, O(n)) before the O(n^2) fits: 10^6 samples take ~0.06 s.

    Args:
        source: Name of the source ("rss", "uss", "heap", "cgroup", "gpu", ...).
        iters: Iteration index of each post-warm-up sample, increasing, possibly irregular.
        values: Bytes at each sample; NaN-free.
        min_samples: Fewer readings give "insufficient" (default `cfg.min_samples`).
        per_call: Apply the per-call rule (`steady_above`); RSS and the cgroup, which
            page cache and lazily touched pages move, are read by the total floor alone.
        creep_calls: The most calls a creep's next run may ask for (`creeping`): what
            `CREEP_MAX_S` holds at the run's pace.

    Returns:
        The trend with its verdict in `kind`, and the fill check where it turned a leak
        into `ambiguous` (None otherwise).

    Raises:
        ValueError: `iters` and `values` differ in length.
    """
    x, y = np.asarray(iters, dtype=np.float64), np.asarray(values, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(
            f"memory source {source!r}: iters has shape {x.shape} but values {y.shape}; "
            "pass one iteration index per sample"
        )
    n = y.size
    if n < max(cfg.min_samples if min_samples is None else min_samples, 2) or x[-1] <= x[0]:
        return _insufficient(source, y, cfg), None
    edge = max(1, min(5, n // 10))
    start, end, peak = float(np.median(y[:edge])), float(np.median(y[-edge:])), float(y.max())
    floor = cfg.floor(float(np.median(y)))
    span = float(x[-1] - x[0])
    bx, by = bin_medians(x, y, cfg.max_points)
    whole = theil_sen(bx, by, cfg.confidence, cfg)
    tail = late_points(bx, cfg.late_fraction)
    # A window of ~10 points cannot see a GC sawtooth or an allocator level shift as
    # correlated noise, but the whole series can, so its autocorrelation is a floor.
    late = theil_sen(bx[-tail:], by[-tail:], cfg.late_confidence, cfg, whole.autocorr)
    growth = whole.slope * span
    # Growth within the series' own noise band (sawtooth, allocator level shifts) is not
    # evidence, however narrow the slope interval claims to be. The band is taken from
    # successive differences so that a plateau's curvature does not count as noise.
    spread = np.subtract(*np.percentile(np.diff(by), [75.0, 25.0])) / np.sqrt(2.0)
    # Memory that fell back by D (GC, arena trim) shows the series swings by D without
    # leaking; a leak never gives back, so its drawdown is the noise alone.
    floor = max(floor, cfg.noise_multiple * float(spread), cfg.drawdown_multiple * drawdown(by))
    found = _memory_kind(whole, late, growth, end - start, floor, span, cfg, per_call,
                         creep_calls)
    creep = found == "creep"        # steady growth under both floors: ambiguous
    kind: MemoryKind = "ambiguous" if found == "creep" else found
    missed = missed_rate(whole, late, floor, span, cfg, per_call)
    fill = None
    if kind == "leak":
        fill = fill_check(bx, by, cfg, int(span))
        if fill.possible:
            kind = "ambiguous"
        else:
            fill = None
    trend = MemoryTrend(
        source=source,
        n=n,
        slope=whole.slope,
        slope_lo=whole.lo,
        slope_hi=whole.hi,
        growth=growth,
        late_slope=late.slope,
        late_lo=late.lo,
        late_hi=late.hi,
        start=start,
        end=end,
        peak=peak,
        kind=kind,
        floor=floor,
        autocorr=whole.autocorr,
        missed=missed,
        creep=creep,
    )
    return trend, fill


def late_points(x: FloatArray, fraction: float) -> int:
    """How many of the last readings form the late window: those in the last `fraction`
    of the run's calls, and at least `_MIN_LATE_POINTS`. Calls, not readings: readings
    come denser where calls are slow, so where a cache's misses compile (milliseconds)
    and its hits take microseconds, the last third of the readings can end with the
    misses, long before the run does (issue 49: PyTorch's cuFFT plan cache on an H100,
    600 slow misses then 960 hits in 0.06 s, read `leak` from the misses alone)."""
    start = x[-1] - fraction * (x[-1] - x[0])
    inside = int(x.size - np.searchsorted(x, start, side="left"))
    return min(x.size, max(_MIN_LATE_POINTS, inside))


def missed_rate(whole: SlopeFit, late: SlopeFit, floor: float, span: float,
                cfg: AnalysisConfig, per_call: bool = True) -> float:
    """The smallest steady leak (bytes/call) this run could have missed, from its own
    noise and length: a leak of rate r shifts both slope intervals by r, so it is called
    once r clears the per-call floor by the whole interval's lower half-width (the
    per-call rule), or once its growth over the span clears the total floor by the late
    interval's lower half-width (the total-floor rule), whichever comes first."""
    if span <= 0:
        return math.inf
    total = max(floor / span + max(0.0, late.slope - late.lo), max(0.0, whole.slope - whole.lo))
    if not per_call:
        return max(0.0, total)
    return max(0.0, min(cfg.live_floor_bytes + max(0.0, whole.slope - whole.lo), total))


def step_trend(step_s: FloatArray, cfg: AnalysisConfig) -> StepTrend:
    """Test whether step times rise from the early to the late window.

    Args:
        step_s: Seconds per measured iteration, in order (warm-up already dropped).
        cfg: Supplies `step_window`, `min_step_samples`, `alpha` and `min_ratio`.

    Returns:
        The medians, late/early ratio, one-sided p-value and the slowdown flag.
    """
    t = np.asarray(step_s, dtype=np.float64)
    n = t.size
    if n == 0:
        return StepTrend(0, 0.0, 0.0, 0.0, 1.0, 1.0, False, True)
    width = max(1, int(n * cfg.step_window))
    early, late = t[:width], t[n - width :]
    early_med, late_med = float(np.median(early)), float(np.median(late))
    ratio = late_med / early_med if early_med > 0 else 1.0
    if n < cfg.min_step_samples:
        return StepTrend(n, float(np.median(t)), early_med, late_med, ratio, 1.0, False, True)
    p_value = mannwhitneyu_p(late, early, "greater")
    trend_p = _monotone_p(t)
    # A slowdown that grows per call (the rfft bug) rises bin after bin; a host that
    # drifts between fast and slow regimes only happens to end slower. Both tests.
    found = StepTrend(n, float(np.median(t)), early_med, late_med, ratio, p_value, False,
                      trend_p=trend_p)
    slowdown = rose(found, cfg) and trend_p < cfg.alpha
    back = came_back(t, early_med, late_med) if slowdown else 0
    return dataclasses.replace(found, slowdown=slowdown and not back, came_back_at=back)


def rose(t: StepTrend, cfg: AnalysisConfig) -> bool:
    """Late steps slower than early ones: the Mann-Whitney p under `alpha`, the ratio
    past `min_ratio`, the medians `step_floor_s` apart (a slowdown also rises bin after
    bin and lasts: `step_trend`)."""
    return (t.p_value < cfg.alpha and t.ratio > cfg.min_ratio
            and t.late_median_s - t.early_median_s >= cfg.step_floor_s)


BACK_BINS = 20          # came_back: the run in this many bins ...
BACK_FROM = 0.6         # ... of which those from this share of the run on are read
BACK_SHARE = 0.5        # a bin back under this share of the rise ...
BACK_SE = 4.0           # ... by this many standard errors of its median
BACK_MIN_BIN = 25       # steps per bin at least (a MAD of fewer is no error bar)


def came_back(t: FloatArray, early_med: float, late_med: float) -> int:
    """Where step times that rose from the early to the late window came back down
    late in the run (the step index of that bin), or 0 where they did not.

    A slowdown lasts: each call slower than the last (the rfft bug), or slower from
    some call on. A cost that cycles with the scenario's input (a loop over names or
    files whose later items cost more, an LRU cache's misses) rises and falls again: a
    run that ends high in its cycle has late steps slower than early ones, and two
    tests of a rise say so (issue 49: an emoji shortcode cycle read `slowdown` 1.48x
    in 3 of 6 runs of a clean release). A bin in the last 40% of the run whose median
    lies under half the rise, by `BACK_SE` standard errors of that median (1.2533 *
    1.4826 * the run's MAD about its bins' medians / sqrt(bin size)), says the rise did
    not last. A steady slowdown keeps those bins above two thirds of the rise, and a
    short or noisy run cannot show a bin under it with that margin: its slowdown
    stands."""
    rise = late_med - early_med
    if rise <= 0 or t.size < BACK_BINS * BACK_MIN_BIN:
        return 0
    parts = np.array_split(t, BACK_BINS)
    starts = np.cumsum([0] + [p.size for p in parts])
    medians = [float(np.median(p)) for p in parts]
    # The spread of a step about its bin's median, pooled over the run (one bin's own
    # MAD, from 25 steps, can come out half the true one)
    spread = [np.abs(p - m) for p, m in zip(parts, medians, strict=True)]
    mad = float(np.median(np.concatenate(spread)))
    line = early_med + BACK_SHARE * rise
    for i in range(int(BACK_BINS * BACK_FROM), BACK_BINS):
        se = 1.2533 * 1.4826 * mad / math.sqrt(parts[i].size)
        if medians[i] + BACK_SE * se <= line:
            return int(starts[i])
    return 0


def _monotone_p(t: FloatArray, max_bins: int = 20) -> float:
    """One-sided Kendall tau p-value that medians of consecutive bins keep rising.

    Bins hold 8 values where there are enough, else fewer (at least one), so a short
    series gets the exact test on 6+ bins; under 6 values there is no evidence (p = 1):
    six in perfect order give p = 1/720, the least p a short series can give.
    """
    bins = min(max_bins, max(t.size // 8, min(6, t.size)))
    if bins < 6:
        return 1.0
    medians = np.array([np.median(x) for x in np.array_split(t, bins)])
    p = kendall_increasing_p(medians)
    return p if p == p else 1.0  # NaN (all equal) -> no trend


def _insufficient(source: str, y: FloatArray, cfg: AnalysisConfig) -> MemoryTrend:
    # Levels are still reported, so a short run's peak can be compared between cells.
    start, end, peak = (float(y[0]), float(y[-1]), float(y.max())) if y.size else (0.0, 0.0, 0.0)
    floor = cfg.floor(float(np.median(y)) if y.size else 0.0)
    zero = 0.0
    return MemoryTrend(source, int(y.size), zero, zero, zero, zero, zero, zero, zero,
                       start, end, peak, "insufficient", floor)  # fmt: skip


def steady_above(whole: SlopeFit, late: SlopeFit, span: float, cfg: AnalysisConfig) -> bool:
    """The per-call rule: the whole slope's interval lies wholly above the per-call
    floor (`live_floor_bytes`), the growth passes `live_min_growth_bytes`, and it does
    not slow down (the late slope keeps `live_decay_ratio` of the whole one, its
    interval above zero). Such growth is never `ok`, however small its total against
    the source's floor: it is a leak, or (`fill.fill_check`) a cache still filling."""
    return per_call_rule(whole.lo, whole.slope * span, late.slope, late.lo, whole.slope, cfg)


def creeping(whole: SlopeFit, late: SlopeFit, span: float, floor: float,
             cfg: AnalysisConfig, most: float = math.inf) -> bool:
    """The per-call rule at `ok_floor_bytes` (16 B/call) in place of `live_floor_bytes`:
    growth too small for either leak rule yet, but steady. Not `ok` (issue 49: a leak of
    84 B/call read `ok` over 2,000 calls of a 14 us step), not a leak until a run long
    enough for its growth to pass the source's floor says so (`creep_rerun`), where one
    can, in at most `most` calls and `CREEP_MAX_CALLS`: a floor set so high that no such
    run would pass it says that growth does not matter, and for a slow step a few bytes
    a call are not worth minutes of running (issue 49: seconds, not calls)."""
    return per_call_rule(whole.lo, whole.slope * span, late.slope, late.lo, whole.slope,
                         cfg, cfg.ok_floor_bytes) \
        and CREEP_MARGIN * floor / whole.lo <= min(most, CREEP_MAX_CALLS)


CREEP_MARGIN = 2.0      # a creep's next run: this many times the calls its floor needs
CREEP_MAX_CALLS = 1_000_000     # the most a budgeted run makes (matrixfile.BUDGET_CAP)
CREEP_MAX_S = 30.0      # the longest run a creep asks for, at the run's pace


def creep_rerun(t: MemoryTrend) -> int:
    """The calls a creeping source's next run measures: enough for growth at its slope's
    lower bound to pass its floor `CREEP_MARGIN` times over (the total-floor rule reads
    the late slope's lower bound, which is lower)."""
    return math.ceil(CREEP_MARGIN * t.floor / max(t.slope_lo, 1.0))


def steady_above_trend(t: MemoryTrend, cfg: AnalysisConfig) -> bool:
    """`steady_above` read back from a trend's own figures (what a reader can check)."""
    return per_call_rule(t.slope_lo, t.growth, t.late_slope, t.late_lo, t.slope, cfg)


def per_call_rule(lo: float, growth: float, late: float, late_lo: float, slope: float,
                  cfg: AnalysisConfig, floor: float | None = None) -> bool:
    return (lo > (cfg.live_floor_bytes if floor is None else floor)
            and growth >= cfg.live_min_growth_bytes
            and late_lo > 0.0 and late >= cfg.live_decay_ratio * slope)


def _memory_kind(
    whole: SlopeFit,
    late: SlopeFit,
    growth: float,
    rise: float,
    floor: float,
    span: float,
    cfg: AnalysisConfig,
    per_call: bool = True,
    creep_calls: float = math.inf,
) -> MemoryKind | Literal["creep"]:
    trending = whole.lo > 0.0 and growth > floor
    if per_call and steady_above(whole, late, span, cfg):
        return "leak"
    # Still growing means even the late slope's lower bound, kept up over the whole
    # span, passes the floor: a creep, or one level shift late on, is not enough.
    if trending and late.lo * span > floor:
        # Growth that slows and ends barely over the floor (a short run of a warming
        # cache or allocator) is not a leak until a longer run says so.
        slowing = late.slope < NEAR_FLOOR_DECAY * whole.slope
        return "ambiguous" if slowing and growth < NEAR_FLOOR_MULTIPLE * floor else "leak"
    # A ratchet or a filled buffer shows as a rise between the first and last samples
    # even where a straight line fits it badly.
    if trending or rise > floor:
        # Against the mean rate of rise as well: Theil-Sen all but ignores a few steps.
        rate = max(whole.slope, rise / span)
        stalled = late.hi < cfg.stall_fraction * rate or late.hi * span <= floor
        return "plateau" if stalled else "ambiguous"
    if per_call and creeping(whole, late, span, floor, cfg, creep_calls):
        return "creep"
    if growth <= floor:
        return "stable"
    return "ambiguous"


def came_back_note(steps: StepTrend | None) -> tuple[Finding, ...]:
    """The note of a rise that came back (`came_back`), or none."""
    if steps is None or not steps.came_back_at:
        return ()
    return (Finding("note", (
        f"late steps {steps.ratio:.2f}x early, but back under half that rise from step "
        f"{steps.came_back_at:,} on: a cost that cycles with the scenario's input, not a "
        "slowdown that lasts")),)
