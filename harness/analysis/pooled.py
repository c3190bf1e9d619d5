"""Between-cell comparisons against the baseline cell: step times and peak memory, and
the facts the verdict reads of them (`baseline_facts`, which
`stages.compare.against_baseline` calls for a sweep and a re-analysis of a recorded
sweep alike; where the facts leave a doubt, the sweep then runs the interleaved rounds
it plans, a re-analysis recalls the recorded ones).

Step times follow asv's rule: a change counts only when a two-sided Mann-Whitney U test
gives p < `alpha` **and** the ratio of medians lies outside [1/min_ratio, min_ratio];
otherwise the direction is "~". Peak memory is one number per cell, so there is no
test: the ratio must pass `peak_min_ratio` and the difference `peak_floor_bytes`.
"""

from __future__ import annotations

import dataclasses
from typing import cast

import numpy as np
import numpy.typing as npt

from harness.analysis.contention import busy_share
from harness.analysis.ranktests import mannwhitneyu_p
from harness.analysis.records import (
    Baseline,
    Direction,
    PeakComparison,
    PeakDirection,
    StepComparison,
)
from harness.analysis.rules import PEAK_RULES, POOLED_RULES, PeakEvidence, PooledEvidence, first_of
from harness.protocol.series import Series
from harness.thresholds import AnalysisConfig


def compare_steps(
    base: npt.NDArray[np.float64], other: npt.NDArray[np.float64], cfg: AnalysisConfig
) -> StepComparison:
    """Compare the step times of a cell with those of the baseline cell.

    Args:
        base: Seconds per measured iteration of the baseline cell.
        other: Seconds per measured iteration of the compared cell.
        cfg: Supplies `alpha` and `min_ratio`.

    Returns:
        The ratio of medians, the p-value and the direction.

    Raises:
        ValueError: Either sample is empty, or the baseline median is not positive, so
            no ratio exists.
    """
    b = np.asarray(base, dtype=np.float64)
    o = np.asarray(other, dtype=np.float64)
    if b.size == 0 or o.size == 0:
        raise ValueError(
            f"compare_steps: need step times on both sides, got {b.size} baseline and "
            f"{o.size} compared; check that both cells ran measured iterations"
        )
    base_median = float(np.median(b))
    if not base_median > 0.0:
        raise ValueError(
            f"compare_steps: baseline median step time is {base_median!r} s, so no ratio "
            "exists; step times must be positive seconds"
        )
    ratio = float(np.median(o)) / base_median
    p_value = mannwhitneyu_p(o, b, "two-sided")
    rule, _ = first_of(PooledEvidence(cfg, p_value, ratio,
                                         abs(float(np.median(o)) - base_median)), POOLED_RULES)
    direction = cast(Direction, rule.says)
    return StepComparison(ratio, p_value, direction, int(b.size), int(o.size), rule.id)


def unchanged_because(steps: StepComparison, cfg: AnalysisConfig) -> str:
    """Which threshold held a "~" pooled comparison back, in words: "p=0.31, not
    significant", "within min_ratio 1.1" or "under the step floor": the rule of
    `rules.POOLED_RULES` that fires on its p and ratio (a "~" comparison that
    passed both was held back by the floor)."""
    rule, _ = first_of(PooledEvidence(cfg, steps.p_value, steps.ratio, 0.0), POOLED_RULES)
    if rule.id == "pooled-unsure":
        return f"not significant at alpha {cfg.alpha:g}"
    if rule.id == "pooled-within":
        return f"within min_ratio {cfg.min_ratio:g}"
    return f"the medians differ by less than the step floor ({cfg.step_floor_s * 1e6:g} µs)"


def compare_peaks(base_peak: float, other_peak: float, cfg: AnalysisConfig) -> PeakComparison:
    """Compare the peak memory of a cell with that of the baseline cell.

    Args:
        base_peak: Peak bytes of the baseline cell.
        other_peak: Peak bytes of the compared cell.
        cfg: Supplies `peak_min_ratio` and `peak_floor_bytes`.

    Returns:
        The ratio and the direction.

    Raises:
        ValueError: The baseline peak is not a positive finite number, or the other
            peak is negative or not finite.
    """
    if not (np.isfinite(base_peak) and base_peak > 0.0):
        raise ValueError(
            f"compare_peaks: baseline peak is {base_peak!r} bytes; it must be positive "
            "(was the baseline's memory sampled?)"
        )
    if not (np.isfinite(other_peak) and other_peak >= 0.0):
        raise ValueError(f"compare_peaks: compared peak is {other_peak!r} bytes; it must be >= 0")
    ratio = float(other_peak) / float(base_peak)
    rule, _ = first_of(PeakEvidence(cfg, ratio, abs(other_peak - base_peak)), PEAK_RULES)
    return PeakComparison(ratio, cast(PeakDirection, rule.says), rule.id)


def compare_to_baseline(base_times: np.ndarray, base_peak: float | None,
                        times: np.ndarray, peak: float | None,
                        cfg: AnalysisConfig) -> tuple[StepComparison | None, PeakComparison | None]:
    """A cell's step times and peak against its baseline's, each None where there is
    nothing to compare (no step times, no peak, a zero median)."""
    try:
        steps = compare_steps(base_times, times, cfg) if len(base_times) and len(times) else None
    except ValueError:  # a zero median: nothing to compare
        steps = None
    try:
        peaks = compare_peaks(base_peak, peak, cfg) if base_peak and peak else None
    except ValueError:
        peaks = None
    return steps, peaks


def baseline_facts(cfg: AnalysisConfig, base: Series, series: Series, label: str,
                   rounds: int, *, good: bool) -> Baseline:
    """Pooled step times, peaks and CPU times of `series` against its baseline's, and
    (for a cell good within its run) how busy the host was for either.

    Args:
        label: The baseline image's label, as reasons name it.
        rounds: The confirmation rounds the cell's settings ask for.
        good: The cell's within-run verdict is good (only then do rounds matter).
    """
    steps, peaks = compare_to_baseline(base.cols.steps, base.cols.peaks.get("rss"),
                                       series.cols.steps, series.cols.peaks.get("rss"), cfg)
    cpu = None
    base_cpu, cell_cpu = base.cols.cpu, series.cols.cpu
    if base_cpu is not None and cell_cpu is not None:
        cpu, _ = compare_to_baseline(base_cpu, None, cell_cpu, None, cfg)
    facts = Baseline(label, steps, peaks, cpu, rounds=rounds)
    if good:
        busy = max(busy_share(base) or 0.0, busy_share(series) or 0.0)
        facts = dataclasses.replace(facts, busy=busy)
    return facts
