"""Between-cell comparisons: asv's rule on step times, ratio plus floor on peaks."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.analysis.baseline import compare_peaks, compare_steps
from harness.thresholds import AnalysisConfig

CFG = AnalysisConfig()
MiB = 2.0**20


def times(seed: int, median: float, n: int = 200) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return median * rng.lognormal(0.0, 0.05, n)


def test_same_distribution_is_not_a_change() -> None:
    result = compare_steps(times(1, 0.05), times(2, 0.05), CFG)
    assert result.direction == "~"
    assert result.ratio == pytest.approx(1.0, abs=0.02)


def test_thirty_percent_slower_is_slower_with_a_tiny_p_value() -> None:
    result = compare_steps(times(1, 0.05), times(2, 0.065), CFG)
    assert result.direction == "slower"
    assert result.ratio == pytest.approx(1.3, rel=0.03)
    assert result.p_value < 1e-10
    assert (result.n_base, result.n_other) == (200, 200)


def test_faster_beyond_the_reciprocal_ratio_is_faster() -> None:
    assert compare_steps(times(1, 0.05), times(2, 0.04), CFG).direction == "faster"


def test_significant_but_small_change_is_not_reported() -> None:
    # 4 % slower is detectable with 2000 samples but below min_ratio = 1.1.
    result = compare_steps(times(1, 0.05, 2000), times(2, 0.052, 2000), CFG)
    assert result.p_value < CFG.alpha
    assert result.direction == "~"


def test_large_ratio_on_three_samples_is_not_significant() -> None:
    result = compare_steps(np.array([1.0, 1.1, 0.9]), np.array([2.0, 2.2, 1.8]), CFG)
    assert result.ratio == pytest.approx(2.0)
    assert result.p_value >= CFG.alpha and result.direction == "~"


def test_empty_or_zero_baseline_raises() -> None:
    with pytest.raises(ValueError, match="0 baseline"):
        compare_steps(np.empty(0), times(1, 0.05), CFG)
    with pytest.raises(ValueError, match="positive"):
        compare_steps(np.zeros(10), times(1, 0.05), CFG)


@pytest.mark.parametrize(
    ("base", "other", "direction"),
    [
        (1000 * MiB, 1200 * MiB, "higher"),
        (1000 * MiB, 800 * MiB, "lower"),
        (1000 * MiB, 1050 * MiB, "~"),
        (4 * MiB, 4.8 * MiB, "~"),  # 20 % but under the 1 MiB floor
    ],
)
def test_peak_direction(base: float, other: float, direction: str) -> None:
    result = compare_peaks(base, other, CFG)
    assert result.direction == direction
    assert result.ratio == pytest.approx(other / base)


def test_bad_peaks_raise() -> None:
    with pytest.raises(ValueError, match="baseline peak"):
        compare_peaks(0.0, 1.0, CFG)
    with pytest.raises(ValueError, match="compared peak"):
        compare_peaks(1.0, float("nan"), CFG)


def test_comparisons_serialise_to_json() -> None:
    steps = compare_steps(times(1, 0.05), times(2, 0.065), CFG).to_dict()
    peaks = compare_peaks(1e9, 2e9, CFG).to_dict()
    assert json.loads(json.dumps(steps))["direction"] == "slower"
    assert json.loads(json.dumps(peaks))["direction"] == "higher"
