"""Theil-Sen slopes with Sen's interval widened for autocorrelated readings, the binned
medians they are fitted to and the late window's readings (`late_points`): what
`growth` reads, for a run's trend and for its fill check (could a cache still filling
explain it). The late window is by calls: by readings, PyTorch's cuFFT plan cache on an
H100 (600 slow misses, then 960 hits in 0.06 s) read `leak` from the misses alone."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from harness.analysis.ranktests import norm_ppf
from harness.thresholds import AnalysisConfig

FloatArray = npt.NDArray[np.float64]
# Fewer points than this in the late window give a meaningless interval.
_MIN_LATE_POINTS = 4


@dataclass(frozen=True, slots=True)
class SlopeFit:
    """A Theil-Sen slope, its Sen interval and the autocorrelation that widened it."""

    slope: float
    lo: float
    hi: float
    autocorr: float


def bin_medians(
    iters: FloatArray, values: FloatArray, max_points: int
) -> tuple[FloatArray, FloatArray]:
    """Reduce a long series to at most `max_points` points, each the median of a bin.

    Bins hold consecutive samples and differ in size by at most one. Medians (rather
    than every k-th sample) stay robust and cost O(n): tens of ms for 10^6 samples.

    Args:
        iters: Iteration index of each sample, increasing.
        values: Sample values.
        max_points: Largest number of points to return.

    Returns:
        The binned iterations and values; the inputs themselves when already short.
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
    """Fit a Theil-Sen slope with Sen's interval, widened for autocorrelated residuals.

    O(n^2) in time and memory; callers bin long series first (see `bin_medians`).

    Args:
        x: Abscissae, increasing.
        y: Ordinates.
        confidence: Two-sided confidence level of the interval.
        cfg: Supplies `autocorrelation` and `max_autocorrelation`.
        min_rho: Lower bound on the autocorrelation, e.g. one estimated on a longer
            stretch of the same series than the few points given.

    Returns:
        The slope, its interval and the autocorrelation used.
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
    of the run's calls (calls, not readings: readings come denser where calls are slow),
    and at least `_MIN_LATE_POINTS`."""
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
