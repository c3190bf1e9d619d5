"""The SciPy-free rank tests give SciPy's p-values (issue 15 point 7: start-up)."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

from harness.analysis.ranktests import (
    _rank_sum_with_ties,
    _rank_with_ties,
    kendall_increasing_p,
    mannwhitneyu_p,
    norm_ppf,
    t_ppf,
)


@pytest.fixture(scope="module")
def scipy() -> ModuleType:
    """SciPy, imported where these tests run (about 1 CPU-s): at the top of the module it
    was imported by every pytest worker's collection. A module fixture also keeps these
    tests on one worker (tests/conftest.py)."""
    import scipy.special
    import scipy.stats
    return scipy


@pytest.mark.parametrize("n1, n2", [(3, 5), (8, 8), (5, 40), (9, 9), (30, 200), (400, 400)])
@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
@pytest.mark.parametrize("ties", [False, True])
def test_mannwhitneyu_matches_scipy(n1: int, n2: int, alternative: str, ties: bool,
                                    scipy: ModuleType) -> None:
    rng = np.random.default_rng(n1 * 1000 + n2 + ties)
    for shift in (0.0, 0.3, 1.5):
        x = rng.normal(shift, 1.0, n1)
        y = rng.normal(0.0, 1.0, n2)
        if ties:
            x, y = np.round(x, 1), np.round(y, 1)
        want = scipy.stats.mannwhitneyu(x, y, alternative=alternative).pvalue
        got = mannwhitneyu_p(x, y, alternative)  # type: ignore[arg-type]
        assert got == pytest.approx(float(want), rel=1e-9, abs=1e-15), (shift, got, want)


def test_the_rank_sum_is_the_sum_of_the_ranks_to_the_bit() -> None:
    """Step times (a clock's ticks: many ties), as the step trend ranks them: the rank
    sum from a sort and two searches is the ranks' sum, and the tie groups are
    np.unique's, so every p-value a verdict read stays the same."""
    rng = np.random.default_rng(62)
    for n1, n2 in ((1, 1), (3, 9), (2000, 2000), (30_000, 30_000), (500, 20_000)):
        for grid in (1e-8, 1e-6, 1e-4):
            a = np.round(rng.gamma(4.0, 2e-7, n1) / grid) * grid
            b = np.round(rng.gamma(4.2, 2e-7, n2) / grid) * grid
            for x, y in ((a, b), (b, a)):
                ranks, want = _rank_with_ties(np.concatenate([x, y]))
                got_sum, got = _rank_sum_with_ties(x, y)
                assert got_sum == float(ranks[:x.size].sum())
                assert np.array_equal(got, want)
    nan = np.array([1.0, np.nan, 2.0, np.nan])
    ranks, want = _rank_with_ties(np.concatenate([nan, nan[:2]]))
    assert _rank_sum_with_ties(nan, nan[:2])[0] == float(ranks[:4].sum())


@pytest.mark.parametrize("n", [2, 3, 6, 12, 20, 33, 40])
def test_kendall_increasing_matches_scipy(n: int, scipy: ModuleType) -> None:
    rng = np.random.default_rng(n)
    for trend in (0.0, 0.05, 0.5):
        for rounding in (None, 1):
            y = np.arange(n) * trend + rng.normal(0, 1, n)
            if rounding is not None:
                y = np.round(y, rounding)
            want = float(scipy.stats.kendalltau(np.arange(n), y, alternative="greater").pvalue)
            got = kendall_increasing_p(y)
            assert got == pytest.approx(want, rel=1e-9, abs=1e-15), (trend, got, want)
    assert kendall_increasing_p(np.ones(8)) != kendall_increasing_p(np.ones(8))  # NaN


def test_norm_ppf_matches_ndtri(scipy: ModuleType) -> None:
    for p in (0.5, 0.9, 0.975, 0.995, 0.9999):
        assert norm_ppf(p) == pytest.approx(float(scipy.special.ndtri(p)), rel=1e-12)


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 9, 10, 29, 60])
def test_t_quantile_is_scipys(df: int, scipy: ModuleType) -> None:
    """Rounds' confidence interval: Student's t quantile, as scipy.special.stdtrit gives."""
    for p in (0.6, 0.75, 0.9, 0.95, 0.975, 0.99, 0.9995, 0.025, 0.3):
        assert t_ppf(p, df) == pytest.approx(float(scipy.special.stdtrit(df, p)), rel=1e-9)
    assert t_ppf(0.5, df) == 0.0
    with pytest.raises(ValueError):
        t_ppf(1.0, df)
