"""The two rank tests the verdicts use, in NumPy and the standard library.

Same p-values as `scipy.stats.mannwhitneyu` (method "auto") and one-sided
`scipy.stats.kendalltau` against the index, without SciPy's slow import
(tests/unit/analysis/test_ranktests.py compares them).
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Literal

import numpy as np
import numpy.typing as npt

Alternative = Literal["two-sided", "greater", "less"]
_NORMAL = NormalDist()


def norm_ppf(p: float) -> float:
    """The standard normal quantile (scipy.special.ndtri)."""
    return _NORMAL.inv_cdf(p)


def norm_sf(z: float) -> float:
    """P(Z > z) for a standard normal Z; NaN stays NaN."""
    if z != z:
        return z
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def _t_within(theta: float, df: int) -> float:
    """P(|T| < sqrt(df) tan(theta)) for Student's t with integer `df` >= 1: the finite
    series of Abramowitz and Stegun 26.7.3 (odd df) and 26.7.4 (even df)."""
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2 == 0:
        term = total = 1.0
        for k in range(2, df, 2):           # (1*3*...*(k-1)) / (2*4*...*k) cos^k
            term *= c2 * (k - 1) / k
            total += term
        return s * total
    if df == 1:
        return 2 * theta / math.pi
    term = total = 1.0
    for k in range(3, df, 2):               # (2*4*...*(k-1)) / (1*3*...*k) cos^(k-1)
        term *= c2 * (k - 1) / k
        total += term
    return 2 / math.pi * (theta + s * math.cos(theta) * total)


def t_ppf(p: float, df: int) -> float:
    """The quantile of Student's t with integer `df` >= 1 (scipy.special.stdtrit), by
    bisection of the exact distribution function: SciPy's import costs a sweep's process
    about 0.8 CPU-s, more than the rest of what a short sweep does there."""
    if not 0.0 < p < 1.0 or df < 1:
        raise ValueError(f"t_ppf: p={p} must lie in (0, 1) and df={df} be >= 1")
    if p <= 0.5:
        return 0.0 if p == 0.5 else -t_ppf(1.0 - p, df)
    want, lo, hi = 2.0 * p - 1.0, 0.0, math.pi / 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if _t_within(mid, df) < want else (lo, mid)
    return math.sqrt(df) * math.tan((lo + hi) / 2)


def _rank_with_ties(values: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64],
                                                              npt.NDArray[np.int64]]:
    """Average ranks (1-based) and the size of every tie group (NaNs one group)."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    upper = np.cumsum(counts)
    average = upper - (counts - 1) / 2.0
    return average[inverse].astype(np.float64), counts.astype(np.int64)


def _rank_sum_with_ties(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]
                        ) -> tuple[float, npt.NDArray[np.int64]]:
    """The sum of `a`'s average ranks (1-based) among `a` and `b`, and the tie-group sizes.

    A value's average rank is (below + at or below + 1) / 2 in the sorted whole, so two
    searches replace an argsort. `a` is searched sorted (sorted keys search faster) and the
    whole is a stable merge of the two sorted samples."""
    keys = np.sort(a)
    whole = np.sort(np.concatenate([keys, np.sort(b)]), kind="stable")
    if whole.size and np.isnan(whole[-1]):     # NaNs sort last, one tie group in np.unique
        ranks, ties = _rank_with_ties(np.concatenate([a, b]))
        return float(ranks[:a.size].sum()), ties
    starts = np.flatnonzero(np.concatenate(([True], whole[1:] != whole[:-1])))
    counts = np.diff(np.append(starts, whole.size))
    below = np.searchsorted(whole, keys, "left")
    at_most = np.searchsorted(whole, keys, "right")
    return float(int(below.sum()) + int(at_most.sum()) + a.size) / 2.0, counts.astype(np.int64)


def _mwu_counts(m: int, n: int) -> list[int]:
    """Number of arrangements with U = 0..m*n: coefficients of the Gaussian binomial
    [m+n choose m]_q = prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i), exact in integers."""
    size = m * n + 1
    poly = [0] * size
    poly[0] = 1
    for i in range(1, m + 1):
        shift = n + i
        for u in range(size - 1, shift - 1, -1):      # times (1 - q^shift)
            poly[u] -= poly[u - shift]
        for u in range(i, size):                       # divided by (1 - q^i)
            poly[u] += poly[u - i]
    return poly


def mannwhitneyu_p(x: npt.ArrayLike, y: npt.ArrayLike,
                   alternative: Alternative = "two-sided") -> float:
    """p-value of the Mann-Whitney U test that x tends to be larger ('greater'), smaller
    ('less') or either ('two-sided') than y."""
    a = np.asarray(x, dtype=np.float64).ravel()
    b = np.asarray(y, dtype=np.float64).ravel()
    n1, n2 = a.size, b.size
    if n1 == 0 or n2 == 0:
        return float("nan")
    rank_sum, ties = _rank_sum_with_ties(a, b)
    u1 = rank_sum - n1 * (n1 + 1) / 2.0
    u2 = n1 * n2 - u1
    if alternative == "greater":
        u, factor = u1, 1.0
    elif alternative == "less":
        u, factor = u2, 1.0
    else:
        u, factor = max(u1, u2), 2.0
    if (n1 <= 8 or n2 <= 8) and not bool(np.any(ties > 1)):
        counts = _mwu_counts(min(n1, n2), max(n1, n2))
        k = round(u)
        tail = sum(counts[k:]) if k < len(counts) else 0
        p = tail / math.comb(n1 + n2, n1)
    else:
        n = n1 + n2
        tie_term = float(np.sum(ties.astype(np.float64) ** 3 - ties))
        s = math.sqrt(n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1))))
        numerator = u - n1 * n2 / 2.0 - 0.5
        if s > 0:
            z = numerator / s
        else:
            z = math.copysign(math.inf, numerator) if numerator else float("nan")
        p = norm_sf(z)
    return min(max(p * factor, 0.0), 1.0)


def _inversions_at_most(n: int, k: int) -> int:
    """Permutations of n items with at most k inversions (Mahonian numbers summed)."""
    counts = [1]
    for j in range(2, n + 1):
        size = len(counts) + j - 1
        out = [0] * size
        running = 0
        for u in range(size):       # out[u] = sum counts[u-j+1 .. u]
            if u < len(counts):
                running += counts[u]
            if u - j >= 0:
                running -= counts[u - j]
            out[u] = running
        counts = out
    return sum(counts[: k + 1])


def kendall_increasing_p(values: npt.ArrayLike) -> float:
    """One-sided p-value that `values` rise with their index (Kendall's tau-b,
    alternative 'greater'); NaN when every value is the same."""
    y = np.asarray(values, dtype=np.float64).ravel()
    n = y.size
    if n < 2:
        return float("nan")
    i, j = np.triu_indices(n, 1)
    dis = int(np.sum(y[i] > y[j]))
    _, counts = np.unique(y, return_counts=True)
    c = counts[counts > 1].astype(np.int64)
    ytie = int((c * (c - 1) // 2).sum())
    y1 = float((c * (c - 1.0) * (2 * c + 5)).sum())
    tot = n * (n - 1) // 2
    if ytie == tot:
        return float("nan")
    if ytie == 0 and (n <= 33 or min(dis, tot - dis) <= 1):
        return _inversions_at_most(n, dis) / math.factorial(n)
    con_minus_dis = tot - ytie - 2 * dis
    m = n * (n - 1.0)
    var = (m * (2 * n + 5) - y1) / 18.0
    return norm_sf(con_minus_dis / math.sqrt(var))
