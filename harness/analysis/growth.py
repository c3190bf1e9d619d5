"""Within-run memory growth per source (step times: `stepreading.step_trend`):
Theil-Sen slopes over the whole measured span and its late window, with Sen's interval
(scaled for autocorrelated samples), decide leak, plateau, stable, ambiguous (creeping
or noisy) or insufficient; a leak must also be growth no bounded fill explains
(`fill_check`). Why the fill check: over a short run a cache, arena or plan pool still
filling, A (1 - exp(-t / tau)), grows like a leak; the thirds' slopes bound how much the
rate fell (r >= late.lo / early.hi), so the smallest fill that fits is growth / (1 -
r^1.5), and a leak is read only where that fill would pass `fill_share` of the level (or
`fill_bytes`). Why the scaled interval: memory readings are autocorrelated (GC
saw-tooth, allocator level shifts), so the variance of Kendall's S is scaled by
(1 + rho) / (1 - rho), rho the residuals' lag-1 autocorrelation (Yue and Wang, 2004).
The rules and their floors: docs/verdicts.md."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import cast

import numpy as np

from harness.analysis.records import MemoryKind, MemoryTrend, signed_size
from harness.analysis.rules import CREEP_MARGIN, TREND_RULES, TrendEvidence, first_of
from harness.analysis.slopes import FloatArray, SlopeFit, bin_medians, late_points, theil_sen
from harness.thresholds import AnalysisConfig

FILL_RERUN = 4              # a run that could be a fill runs again this many times longer
FILL_CONFIDENCE = 0.95
_MIN_FILL_POINTS = 6        # two readings a third at least; below, the growth alone says


# Why a run that could tell more does not: the sweep's words (the plugin says them as
# its marker's arguments, `api.marked`).
RUNS_NO_MORE = "(it runs no more: its repeats are spent or --iterations bounds it)"


@dataclass(frozen=True, slots=True)
class Fill:
    """Whether a bounded fill could still explain a source's growth at this length.

    Attributes:
        possible: A saturating fill no larger than `bound` fits the data.
        growth: Bytes grown over the measured calls.
        calls: Measured calls.
        amplitude: The smallest fill A (1 - exp(-t / tau)) that fits the growth and how
            little its rate fell from the first third to the last (inf: no fill fits).
        rerun: Calls a run again measures to tell a leak from a fill.
        bound: The largest fill allowed for: `cfg.fill_share` of the median level, at
            most `cfg.fill_bytes`.
        fell: The largest fall inside the run where no fill fits but that fall is a
            quarter of the growth or more (a cache that evicts in bursts), else 0.
    """

    possible: bool
    growth: float
    calls: int
    amplitude: float
    rerun: int
    bound: float = 0.0
    fell: float = 0.0

    @property
    def text(self) -> str:
        """"+300 KiB over 600 calls: a leak or a cache still filling; running it again
        for 2,400"."""
        return self.said(again=True)

    def said(self, again: bool) -> str:
        """The text, where the cell runs again (`again`) or may not (its repeats spent, or
        --iterations bounds its runs):
        "...; a run of 9,600 calls would tell"."""
        then = (f"running it again for {self.rerun:,}" if again
                else f"a run of {self.rerun:,} calls would tell {RUNS_NO_MORE}")
        if self.fell:
            return (f"{signed_size(self.growth)} over {self.calls:,} calls, "
                    f"{signed_size(-self.fell)} given back at once: a leak or a cache that evicts; "
                    f"{then}")
        return (f"{signed_size(self.growth)} over {self.calls:,} calls: a leak or a cache still "
                f"filling; {then}")


def drawdown(y: FloatArray) -> float:
    """The largest fall of a series below its running peak (0 for an empty one)."""
    return float(np.max(np.maximum.accumulate(y) - y)) if y.size else 0.0


def fill_check(iters: FloatArray, values: FloatArray, cfg: AnalysisConfig,
               calls: int | None = None) -> Fill:
    """Whether the growth of a source called leaking could still be a bounded fill
    A (1 - exp(-t / tau)): the smallest fill that fits the first and last thirds' slopes
    is excluded when it exceeds `cfg.fill_share` of the source's level or `cfg.fill_bytes`.
    The live decider (`sequential`) and the post-run trend both ask this.

    Args:
        iters: Calls of the readings, increasing (binned or not).
        values: Bytes at each reading.
        cfg: Supplies `fill_share` and `fill_bytes` (0 turns the check off).
        calls: Measured calls of the run (default: the readings' span).

    Returns:
        The check, with the re-run length `FILL_RERUN` times the calls."""
    x, y = np.asarray(iters, dtype=np.float64), np.asarray(values, dtype=np.float64)
    span = float(x[-1] - x[0]) if x.size else 0.0
    measured = int(calls if calls is not None else span)
    growth = float(y[-1] - y[0]) if y.size else 0.0
    amplitude = _fill_amplitude(x, y, cfg, nested=False)
    bound = min(cfg.fill_share * abs(float(np.median(y))) if y.size else 0.0, cfg.fill_bytes)
    if y.size >= _MIN_FILL_POINTS:
        edge = max(1, y.size // 6)
        growth = float(np.median(y[-edge:]) - np.median(y[:edge]))
    # A fall of a quarter of the rise: a cache that evicts in bursts, its tooth longer
    # than the run (JAX's malloc heap on an H100: +490 B/call for ~8,000 calls, then
    # -4 MB; 5 s saw 1.3 teeth). A leak never gives back; in a run FILL_RERUN times
    # longer its rise outgrows the same fall, and a saw-tooth's does not.
    drop = drawdown(y)
    fits = amplitude <= bound
    fell = drop if not fits and growth > 0 and drop * FILL_RERUN >= growth else 0.0
    possible = bound > 0 and (fits or fell > 0)
    return Fill(possible, growth, measured, amplitude, FILL_RERUN * max(1, measured), bound,
                fell)


def _fill_amplitude(x: FloatArray, y: FloatArray, cfg: AnalysisConfig, nested: bool) -> float:
    n = y.size
    if n < 2 or x[-1] <= x[0]:
        return 0.0
    if n < _MIN_FILL_POINTS:
        rates = np.diff(y) / np.maximum(np.diff(x), 1.0)
        equal = rates.min() > 0 and rates.min() == rates.max()
        return math.inf if equal else max(0.0, float(y[-1] - y[0]))
    k = max(2, n // 3)
    early = theil_sen(x[:k], y[:k], FILL_CONFIDENCE, cfg)
    late = theil_sen(x[-k:], y[-k:], FILL_CONFIDENCE, cfg)
    if early.hi < late.lo and not nested and n >= 2 * _MIN_FILL_POINTS:
        half = n // 2
        return _fill_amplitude(x[half:], y[half:], cfg, nested=True)
    rate_growth = (float(np.median(y[-k:]) - np.median(y[:k]))
                   / max(float(np.median(x[-k:]) - np.median(x[:k])), 1.0))
    growth = max(0.0, rate_growth * float(x[-1] - x[0]))
    if early.hi <= 0.0 or late.lo <= 0.0:
        return growth
    ratio = late.lo / early.hi
    if ratio >= 1.0:
        return math.inf
    return growth / (1.0 - math.pow(ratio, 1.5))


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
    """Classify the trend of one memory source after warm-up (a long series binned to
    `cfg.max_points` medians first).

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
        ValueError: `iters` and `values` differ in length."""
    x, y = np.asarray(iters, dtype=np.float64), np.asarray(values, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(
            f"memory source {source!r}: iters has shape {x.shape} but values {y.shape}; "
            "pass one iteration index per sample"
        )
    n = y.size
    first = TrendEvidence(cfg, n, cfg.min_samples if min_samples is None else min_samples,
                          float(x[-1] - x[0]) if n else 0.0, per_call=per_call,
                          creep_calls=creep_calls)
    if TREND_RULES[0].test(first) is not None:    # `too-few`: nothing to fit
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
    rule, _ = first_of(dataclasses.replace(first, whole=whole, late=late, growth=growth,
                                             rise=end - start, floor=floor), TREND_RULES)
    creep = rule.says == "creep"        # steady growth under both floors: ambiguous
    kind = cast(MemoryKind, "ambiguous" if creep else rule.says)
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


def _insufficient(source: str, y: FloatArray, cfg: AnalysisConfig) -> MemoryTrend:
    # Levels are still reported, so a short run's peak can be compared between cells.
    start, end, peak = (float(y[0]), float(y[-1]), float(y.max())) if y.size else (0.0, 0.0, 0.0)
    floor = cfg.floor(float(np.median(y)) if y.size else 0.0)
    zero = 0.0
    return MemoryTrend(source, int(y.size), zero, zero, zero, zero, zero, zero, zero,
                       start, end, peak, "insufficient", floor)  # fmt: skip


CREEP_MAX_S = 30.0      # the longest run a creep asks for, at the run's pace


def creep_rerun(t: MemoryTrend) -> int:
    """The calls a creeping source's next run measures: enough for growth at its slope's
    lower bound to pass its floor `CREEP_MARGIN` times over (the total-floor rule reads
    the late slope's lower bound, which is lower)."""
    return math.ceil(CREEP_MARGIN * t.floor / max(t.slope_lo, 1.0))
