"""Whether a source's growth could still be a bounded fill (a cache, arena or plan pool
still filling) at this run's length: the one rule the post-run trend (`growth`) and the
live decider (`sequential`) both apply."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from harness.analysis.slopes import FloatArray, theil_sen
from harness.analysis.trends import signed_size
from harness.thresholds import AnalysisConfig

FILL_RERUN = 4              # a run that could be a fill runs again this many times longer
FILL_CONFIDENCE = 0.95
_MIN_FILL_POINTS = 6        # two readings a third at least; below, the growth alone says


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
        """The text, where the cell runs again (`again`) or may not (its repeats spent):
        "...; a run of 9,600 calls would tell"."""
        then = (f"running it again for {self.rerun:,}" if again
                else f"a run of {self.rerun:,} calls would tell (its repeats are spent)")
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
    """Whether the growth of a source called leaking could still be a bounded fill.

    A fill A (1 - exp(-t / tau)) read over L calls grows by A (1 - exp(-L / tau)), and
    its rate in the last third is r = exp(-2 L / (3 tau)) times its rate in the first.
    The Theil-Sen slopes of the two thirds (at `FILL_CONFIDENCE`) bound r from below
    by `late.lo / early.hi`; every fill that fits decays no faster, so the smallest is
    A* = growth / (1 - r^1.5). A fill is excluded when A* exceeds `cfg.fill_share` of
    the source's median level (a cache as large as half the memory the source holds),
    or `cfg.fill_bytes`, the smaller (a leak that grows by its exact size every call:
    r = 1, A* = inf); a short or noisy run cannot exclude one, whatever its slope
    interval says. Growth
    that speeds up (the first third's slope below the last's) started after the run
    did: the check reads the later half alone, from nearer the growth's start.
    Fewer than six readings give no shape: the growth alone must exceed the bound, or
    the readings' rates must be equal. The live decider (`sequential`) and the post-run
    trend both ask this, on the readings they have.

    Args:
        iters: Calls of the readings, increasing (binned or not).
        values: Bytes at each reading.
        cfg: Supplies `fill_share` and `fill_bytes` (0 turns the check off).
        calls: Measured calls of the run (default: the readings' span).

    Returns:
        The check, with the re-run length `FILL_RERUN` times the calls.
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
