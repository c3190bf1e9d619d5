"""The SciPy-free rank tests give SciPy's p-values (issue 15 point 7: start-up)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from harness.analysis.ranktests import kendall_increasing_p, mannwhitneyu_p, norm_ppf


@pytest.mark.parametrize("n1, n2", [(3, 5), (8, 8), (5, 40), (9, 9), (30, 200), (400, 400)])
@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
@pytest.mark.parametrize("ties", [False, True])
def test_mannwhitneyu_matches_scipy(n1: int, n2: int, alternative: str, ties: bool) -> None:
    rng = np.random.default_rng(n1 * 1000 + n2 + ties)
    for shift in (0.0, 0.3, 1.5):
        x = rng.normal(shift, 1.0, n1)
        y = rng.normal(0.0, 1.0, n2)
        if ties:
            x, y = np.round(x, 1), np.round(y, 1)
        want = stats.mannwhitneyu(x, y, alternative=alternative).pvalue
        got = mannwhitneyu_p(x, y, alternative)  # type: ignore[arg-type]
        assert got == pytest.approx(float(want), rel=1e-9, abs=1e-15), (shift, got, want)


@pytest.mark.parametrize("n", [2, 3, 6, 12, 20, 33, 40])
def test_kendall_increasing_matches_scipy(n: int) -> None:
    rng = np.random.default_rng(n)
    for trend in (0.0, 0.05, 0.5):
        for rounding in (None, 1):
            y = np.arange(n) * trend + rng.normal(0, 1, n)
            if rounding is not None:
                y = np.round(y, rounding)
            want = float(stats.kendalltau(np.arange(n), y, alternative="greater").pvalue)
            got = kendall_increasing_p(y)
            assert got == pytest.approx(want, rel=1e-9, abs=1e-15), (trend, got, want)
    assert kendall_increasing_p(np.ones(8)) != kendall_increasing_p(np.ones(8))  # NaN


def test_norm_ppf_matches_ndtri() -> None:
    for p in (0.5, 0.9, 0.975, 0.995, 0.9999):
        assert norm_ppf(p) == pytest.approx(float(special.ndtri(p)), rel=1e-12)
