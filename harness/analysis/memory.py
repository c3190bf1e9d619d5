"""The one decision of memory growth: what a cell's memory did, from its samples so far.

`memory_reading` is pure, asked alike live, after the run and by `--reanalyze`. Per source,
`trend_and_fill` fits Theil-Sen slopes (whole span, late window) and the rules decide; a
leak must also be growth no bounded fill explains (`fill_check`). Floors: docs/verdicts.md."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal, cast

import numpy as np
import numpy.typing as npt

from harness.analysis.facts import Facts
from harness.analysis.ranktests import norm_ppf
from harness.analysis.records import (
    Finding,
    MemoryKind,
    MemoryTrend,
    SlopeFit,
    missed_text,
    rate_words,
    signed_size,
    size,
)
from harness.analysis.rules import (
    CARRIERS,
    CREEP_MARGIN,
    GARBAGE,
    GARBAGE_RULES,
    PRIMARY,
    TOTAL_ONLY,
    TREND_RULES,
    WORKERS,
    CollectedEvidence,
    Evidence,
    TrendEvidence,
    first_of,
    leaking,
    memory_rule,
    shown,
)
from harness.protocol.series import TREND_NAMES, Series
from harness.thresholds import AnalysisConfig

FloatArray = npt.NDArray[np.float64]
# Fewer points than this in the late window give a meaningless interval.
_MIN_LATE_POINTS = 4


def bin_medians(
    iters: FloatArray, values: FloatArray, max_points: int
) -> tuple[FloatArray, FloatArray]:
    """Reduce a long series to at most `max_points` medians of consecutive bins, in O(n).

    Args:
        iters, values: iteration of each sample (increasing), and its value.
        max_points: the most points to return (fewer inputs come back as they are).
    """
    n = values.size
    if n <= max_points:
        return iters, values
    size, extra = divmod(n, max_points)
    # The first `extra` bins hold size + 1 samples, the rest `size`.
    cut = extra * (size + 1)
    out_x, out_y = np.empty(max_points), np.empty(max_points)
    groups = ((0, cut, size + 1, slice(0, extra)), (cut, n, size, slice(extra, None)))
    for lo, hi, width, into in groups:
        if hi > lo:
            out_x[into] = np.median(iters[lo:hi].reshape(-1, width), axis=1)
            out_y[into] = np.median(values[lo:hi].reshape(-1, width), axis=1)
    return out_x, out_y


def theil_sen(
    x: FloatArray, y: FloatArray, confidence: float, cfg: AnalysisConfig, min_rho: float = 0.0
) -> SlopeFit:
    """Theil-Sen slope with Sen's interval, widened for autocorrelated residuals; O(n^2), so
    bin long series first.

    Args:
        x, y: abscissae (increasing) and ordinates.
        confidence: two-sided confidence level of the interval.
        cfg: the analysis settings.
        min_rho: lower bound on the autocorrelation (e.g. from a longer stretch).
    """
    n = x.size
    i, j = np.triu_indices(n, 1)
    dx = x[j] - x[i]
    slopes = (y[j] - y[i])[dx > 0] / dx[dx > 0]
    m = slopes.size
    if m == 0:
        return SlopeFit(0.0, -np.inf, np.inf, 0.0)
    mid = (m - 1) // 2, m // 2
    rho = 0.0
    var_s = n * (n - 1) * (2 * n + 5) / 18.0
    z = norm_ppf(0.5 + confidence / 2.0)
    ranks = _interval_ranks(m, z * np.sqrt(var_s))
    part = np.partition(slopes, sorted({*mid, *ranks}))
    slope = 0.5 * float(part[mid[0]] + part[mid[1]])
    if cfg.autocorrelation:
        rho = min(max(_lag1(y - slope * x), min_rho), cfg.max_autocorrelation)
        if rho > 0.0:
            ranks = _interval_ranks(m, z * np.sqrt(var_s * (1.0 + rho) / (1.0 - rho)))
            part = np.partition(part, sorted(set(ranks)))
    return SlopeFit(slope, float(part[ranks[0]]), float(part[ranks[1]]), rho)


def late_points(x: FloatArray, fraction: float) -> int:
    """How many of the last readings form the late window: those in the last `fraction`
    of the calls (readings come denser where calls are slow), `_MIN_LATE_POINTS` at least."""
    start = x[-1] - fraction * (x[-1] - x[0])
    inside = int(x.size - np.searchsorted(x, start, side="left"))
    return min(x.size, max(_MIN_LATE_POINTS, inside))


def _interval_ranks(m: int, half_width: float) -> tuple[int, int]:
    # Sen (1968), eq. 2.6: the interval is bounded by order statistics (m -+ z*sd(S)) / 2.
    lo = int(np.clip(np.floor((m - half_width) / 2.0), 0, m - 1))
    hi = int(np.clip(np.ceil((m + half_width) / 2.0), 0, m - 1))
    return lo, hi


def _lag1(residuals: FloatArray) -> float:
    r = residuals - residuals.mean()
    denom = float(r @ r)
    if denom <= 0.0:
        return 0.0
    return max(0.0, float(r[:-1] @ r[1:]) / denom)


FILL_RERUN = 4              # a run that could be a fill runs again this many times longer
FILL_CONFIDENCE = 0.95
_MIN_FILL_POINTS = 6        # two readings a third at least; below, the growth alone says


# Why a run that could tell more does not, in the sweep's words.
RUNS_NO_MORE = "(it runs no more: its repeats are spent or --iterations bounds it)"


@dataclass(frozen=True, slots=True)
class Fill:
    """Whether a bounded fill could still explain a source's growth at this length.

    Attributes:
        possible, bound: a saturating fill no larger than `bound` (`fill_share` of the level,
            `fill_bytes` at most) fits the data.
        growth, calls: bytes grown over the measured calls, and their number.
        amplitude: the smallest fill fitting the growth and its fall in rate (inf: none fits).
        rerun: calls a run again measures to tell a leak from a fill.
        fell: a fall of a quarter of the growth or more where no fill fits (a cache evicting in
            bursts), else 0.
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
        """E.g. "+300 KiB over 600 calls: a leak or a cache still filling; ..."."""
        return self.said(again=True)

    def said(self, again: bool) -> str:
        """The text, with the run that would tell (`again`: the cell runs again)."""
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
    """Whether a leaking source's growth could still be a bounded fill no larger than
    `cfg.fill_share` of the level or `cfg.fill_bytes` (0: no check); asked live and after.

    Args:
        iters, values: calls of the readings (increasing) and bytes at each.
        calls: measured calls of the run (default: the readings' span).
    """
    x, y = np.asarray(iters, dtype=np.float64), np.asarray(values, dtype=np.float64)
    span = float(x[-1] - x[0]) if x.size else 0.0
    measured = int(calls if calls is not None else span)
    growth = float(y[-1] - y[0]) if y.size else 0.0
    amplitude = _fill_amplitude(x, y, cfg, nested=False)
    bound = min(cfg.fill_share * abs(float(np.median(y))) if y.size else 0.0, cfg.fill_bytes)
    if y.size >= _MIN_FILL_POINTS:
        edge = max(1, y.size // 6)
        growth = float(np.median(y[-edge:]) - np.median(y[:edge]))
    # A fall of a quarter of the rise: a cache that evicts in bursts. A leak never gives
    # back; a run FILL_RERUN times longer tells them apart.
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
    """Classify one memory source's trend after warm-up, and the fill check that turned a
    leak `ambiguous` (else None).

    Args:
        source: the source's name ("rss", "uss", "heap", "cgroup", "gpu", ...).
        iters, values: calls of each post-warm-up sample (increasing) and its bytes.
        min_samples: fewer readings give "insufficient" (default `cfg.min_samples`).
        per_call: apply the per-call rule; not for RSS and the cgroup, which pages move.
        creep_calls: the most calls a creep's next run may ask for (`CREEP_MAX_S`).
    """
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
# A short window cannot see a saw-tooth as correlated noise; the whole series can.
    late = theil_sen(bx[-tail:], by[-tail:], cfg.late_confidence, cfg, whole.autocorr)
    growth = whole.slope * span
    # Growth within the series' own noise band is no evidence. The band comes from
    # successive differences, so a plateau's curvature is not counted as noise.
    spread = np.subtract(*np.percentile(np.diff(by), [75.0, 25.0])) / np.sqrt(2.0)
    # A fall of D shows the series swings by D; a leak never gives back.
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
    """The smallest steady leak (bytes/call) this run could have missed, from its noise and
    length: the least rate either leak rule would catch."""
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
    lower bound to pass its floor `CREEP_MARGIN` times."""
    return math.ceil(CREEP_MARGIN * t.floor / max(t.slope_lo, 1.0))


# Sources that count exact bytes (device memory, the framework allocator): no allocator
# noise, so fewer readings give a slope.
EXACT = frozenset({"gpu", "fw"})
EXACT_MIN_SAMPLES = 5

Reading = Literal["leak", "filling", "insufficient", "creep", "unsure", "unconfirmed",
                  "plateau", "ok"]


@dataclass(frozen=True)
class MemoryReading:
    """What a cell's memory did over its samples so far (`memory_reading`).

    Attributes:
        kind: leak, filling, insufficient, unsure, unconfirmed, plateau or ok.
        reason, carrier: the reading in words with its figures, and the source it is about.
        memory, fill, findings: every source's trend; the fill check behind `filling`; the leak
            findings, one per leaking carrier (a plateau's).
        rerun: the calls an ambiguous cell's next run measures (None: twice this run).
    """

    kind: Reading
    reason: str
    carrier: str | None
    memory: dict[str, MemoryTrend]
    fill: Fill | None = None
    findings: tuple[Finding, ...] = ()
    cyclic: Finding | None = None      # the heap's growth was cyclic garbage (`garbage`)
    calls: int = 0                     # measured calls the samples span
    rule: str = ""                     # the id of the rule that decided (`rules.RULES`)
    filling: tuple[str, ...] = ()      # the sources a bounded fill still fits
    rerun: int | None = None

    @property
    def missed_said(self) -> str:
        """"no leak above 40 B/call in 1,000 calls" ("" when not known), with the worker
        processes' own bound after it where read."""
        said = missed_text(self.missed, self.calls)
        kids = missed_text(self.memory["kids"].missed, None) if "kids" in self.memory else ""
        return "; ".join(s for s in (said, kids and f"worker processes: {kids}") if s)

    @property
    def missed(self) -> float:
        """The smallest steady leak (bytes/call) the run could have missed, by its most
        sensitive host source (NaN without one)."""
        rates = [r for s in PRIMARY if s in self.memory
                 and (r := self.memory[s].missed) is not None and math.isfinite(r)]
        return min(rates) if rates else math.nan


def risen(t: MemoryTrend) -> float:
    """What a source grew: first readings to highest (slope times calls overstates a
    fill), or the slope's growth where it never rose above its start."""
    rise = t.peak - t.start
    return rise if rise > 0 else t.growth


def leak_reason(found: list[tuple[str, MemoryTrend]], measured: int) -> str:
    """The size a filling cache would need to explain the growth: "gpu grows ... never
    levelling off: a cache would hold more than 1.5 GiB; ..."."""
    name, t = found[0]
    rate = rate_words(t.slope, t.slope_lo, t.slope_hi)
    grows = "workers grow" if name == WORKERS else f"{name} grows"
    # First readings to last (medians of a few each), so one high reading cannot make the
    # total disagree with the rate.
    kept = t.end - t.start
    grew = kept if kept > 0 else risen(t)
    text = (f"{grows} {rate}, "
            f"{grew / 1024**2:+.2f} MiB over {measured:,} calls, never levelling off: a "
            f"cache would hold more than {size(grew)}")
    if len(found) > 1:
        text += "; also " + ", ".join(f"{shown(n)} {rate_words(o.slope)}" for n, o in found[1:])
    return text


def trends_and_fills(series: Series, cfg: AnalysisConfig
                     ) -> tuple[dict[str, MemoryTrend], dict[str, Fill]]:
    """Every source's trend, and the fill checks that turned a leak ambiguous, by source."""
    heap_cfg = dataclasses.replace(cfg, leak_floor_bytes=cfg.heap_floor_bytes)
    out: dict[str, MemoryTrend] = {}
    fills: dict[str, Fill] = {}
    pace = series.cols.pace
    creep_calls = CREEP_MAX_S / pace if pace else math.inf
    for key, name in TREND_NAMES.items():
        x, y = series.cols.memory[key]
        if len(x):
            out[name], fill = trend_and_fill(
                name, x, y, heap_cfg if name == "heap" else cfg,
                min(cfg.min_samples, EXACT_MIN_SAMPLES) if name in EXACT else None,
                per_call=name not in TOTAL_ONLY, creep_calls=creep_calls)
            if fill is not None:
                fills[name] = dataclasses.replace(
                    fill, growth=out[name].growth, calls=series.measured,
                    rerun=FILL_RERUN * max(1, series.measured))
    return out, fills


def memory_reading(series: Series, cfg: AnalysisConfig, again: bool = True,
                   collected: bool = True) -> MemoryReading:
    """The one decision of a cell's memory over `series`'s samples (so far).

    Args:
        again: An ambiguous cell runs again, as a filling reading's reason says.
        collected: Apply the end record's `gc.collect()` reading (`garbage`) if any.
    """
    memory, fills = trends_and_fills(series, cfg)
    return reading_of(memory, fills, series, again, collected)


def reading_of(memory: dict[str, MemoryTrend], fills: dict[str, Fill], series: Series,
               again: bool = True, collected: bool = True) -> MemoryReading:
    """`memory_reading` from trends already made."""
    cyclic = garbage(series, memory["heap"]) if collected and "heap" in memory else None
    if cyclic is not None:
        memory = {**memory, "heap": dataclasses.replace(memory["heap"], kind="stable")}
        fills = {k: v for k, v in fills.items() if k != "heap"}
    measured = series.cols.calls

    def out(kind: Reading, reason: str, carrier: str | None, fill: Fill | None = None,
            findings: tuple[Finding, ...] = (), rerun: int | None = None) -> MemoryReading:
        return MemoryReading(kind, reason, carrier, memory, fill, findings, cyclic, measured,
                             rule.id, tuple(fills),
                             fill.rerun if fill is not None else rerun)

    ev = Evidence(memory, Facts(filling=tuple(fills)))
    rule, named = memory_rule(ev)
    if rule.id == "leak":
        found = leaking(memory)
        return out("leak", leak_reason(found, measured), named, findings=tuple(
            Finding("leak", f"leak: {shown(n)} {rate_words(t.slope)}") for n, t in found))
    if rule.id == "filling":
        fill = next(fills[p] for p in CARRIERS[named] if p in fills)
        return out("filling", f"{shown(named)} {fill.said(again)}", named, fill)
    if rule.id == "insufficient":
        if named == WORKERS:
            n = memory[named].n
            return out("insufficient", f"the worker processes' memory read {n} times: too "
                       "few to call them flat; a run that reads them more tells (running "
                       "it again)" if again else f"the worker processes' memory read {n} "
                       "times: too few to call them flat", named)
        return out("insufficient", "too few memory samples to decide",
                   None if named == "none" else named)
    if rule.id == "creep":
        t, calls = memory[named], creep_rerun(memory[named])
        then = (f"a run of {calls:,} calls or more tells: running it again" if again
                else f"a run of {calls:,} calls would tell {RUNS_NO_MORE}")
        return out("creep", f"{shown(named)} grows {t.slope:+,.0f} B/call (CI {t.slope_lo:+,.0f}.."
                   f"{t.slope_hi:+,.0f}) without slowing, {size(t.growth)} over "
                   f"{measured:,} calls: under its {size(t.floor)} floor, a small leak or "
                   f"a cache still filling; {then}", named, rerun=calls)
    if rule.id == "unsure":
        who = "the worker processes' memory" if named == WORKERS else named
        return out("unsure", f"{who} neither clearly growing nor stable", named)
    primary = ev.primary
    if rule.id == "unconfirmed":
        t = memory["rss"]
        return out("unconfirmed", f"rss grows {rate_words(t.slope)} but {primary} does "
                   "not confirm it", "rss")
    if rule.id == "plateau":
        t = memory[named]
        # The rise, not slope times span: Theil-Sen all but ignores a fill's few steps.
        grew = risen(t)
        return out("plateau", f"{shown(named)} grew {grew / 1024**2:+.2f} MiB then flattened",
                   named, findings=(Finding("plateau", "plateau"),))
    said = ("memory stable once collected (the heap's growth was cyclic garbage)"
            if cyclic is not None else "memory stable")
    return out("ok", said, primary)


def garbage(series: Series, heap: MemoryTrend) -> Finding | None:
    """A heap that grew like a leak but that the `gc.collect()` after the last call
    brought back within the floor: cyclic garbage, not a leak (a leak keeps what it grew).
    None when that is not so."""
    got = (series.end or {}).get("collected")
    before = after = None
    if isinstance(got, dict):
        before, after = got.get("heap"), got.get("heap_after")
    if not isinstance(before, int) or not isinstance(after, int):
        return None
    grew, kept = before - heap.start, after - heap.start
    rule, _ = first_of(CollectedEvidence(heap.kind, heap.creep, grew, kept, heap.floor),
                       GARBAGE_RULES)
    if rule.says != GARBAGE:
        return None
    return Finding("note", f"garbage: the heap grew {grew / 1024:+.0f} KiB; gc.collect() "
                   f"after the last call gave back {(before - after) / 1024:.0f} KiB, and "
                   f"it keeps {kept / 1024:+.0f} KiB: cyclic garbage, not a leak")
