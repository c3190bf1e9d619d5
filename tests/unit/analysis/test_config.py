"""AnalysisConfig: defaults, and errors that name the matrix.yaml key and the range."""

from __future__ import annotations

import pytest

from harness.thresholds import AnalysisConfig


def test_defaults_are_valid_and_follow_asv() -> None:
    cfg = AnalysisConfig()
    assert (cfg.alpha, cfg.min_ratio) == (0.002, 1.1)
    assert cfg.floor(10 * 2**30) == pytest.approx(0.001 * 10 * 2**30)
    assert cfg.floor(0.0) == cfg.leak_floor_bytes


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("alpha", 0.0, r"analysis\.alpha: 0\.0 is outside the allowed range \(0, 0\.5\]"),
        ("min_ratio", 0.9, r"analysis\.min_ratio: .* \[1, inf\)"),
        ("late_fraction", 0.9, r"analysis\.late_fraction"),
        ("confidence", 1.0, r"analysis\.confidence"),
        ("max_points", 10, r"analysis\.max_points"),
        ("min_samples", 10.5, r"analysis\.min_samples: expected an integer"),
        ("min_samples", True, r"analysis\.min_samples: expected an integer"),
        ("alpha", "0.01", r"analysis\.alpha: expected a number"),
        ("autocorrelation", 1, r"analysis\.autocorrelation: expected true or false"),
        ("leak_floor_bytes", float("inf"), r"analysis\.leak_floor_bytes"),
    ],
)
def test_bad_values_name_the_key_and_range(key: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AnalysisConfig(**{key: value})  # type: ignore[arg-type]
