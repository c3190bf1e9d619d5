"""A cell against its row's baseline (`baseline_facts`): steps by asv's rule (Mann-Whitney
p < `alpha`, median ratio beyond `min_ratio`), peaks by `peak_min_ratio`/`peak_floor_bytes`.

A change is confirmed only on interleaved rounds (B S B S ...), all agreeing: pooled
autocorrelated steps make a small load drift look certain."""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple, cast

import numpy as np
import numpy.typing as npt

from harness.analysis.ranktests import mannwhitneyu_p, t_ppf
from harness.analysis.records import (
    Baseline,
    Confirmation,
    Direction,
    PeakComparison,
    PeakDirection,
    Round,
    StepComparison,
)
from harness.analysis.rules import (
    CONFIRM_ROUNDS,
    CONFIRM_RULES,
    FEW_ROUNDS,
    LEFT_OUT,
    PEAK_RULES,
    POOLED_RULES,
    ROUND_RULES,
    SETTLED,
    SETTLED_RULES,
    ConfirmEvidence,
    PeakEvidence,
    PooledEvidence,
    RoundEvidence,
    SettledEvidence,
    busy_run,
    first_of,
    speeds_apart,
)
from harness.analysis.stepreading import RunStat, busy_share, speed_scaled
from harness.protocol.series import Series
from harness.thresholds import AnalysisConfig


def compare_steps(
    base: npt.NDArray[np.float64], other: npt.NDArray[np.float64], cfg: AnalysisConfig
) -> StepComparison:
    """Compare a cell's step times with the baseline's: ratio of medians, p-value, direction;
    ValueError if a sample is empty or the baseline median is not positive.

    Args:
        base, other: seconds per measured iteration of the baseline and the cell.
        cfg: the analysis settings.
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
    """Which threshold held a "~" pooled comparison back (`rules.POOLED_RULES`), in words:
    "p=0.31, not significant", "within min_ratio 1.1" or "under the step floor"."""
    rule, _ = first_of(PooledEvidence(cfg, steps.p_value, steps.ratio, 0.0), POOLED_RULES)
    if rule.id == "pooled-unsure":
        return f"not significant at alpha {cfg.alpha:g}"
    if rule.id == "pooled-within":
        return f"within min_ratio {cfg.min_ratio:g}"
    return f"the medians differ by less than the step floor ({cfg.step_floor_s * 1e6:g} µs)"


def compare_peaks(base_peak: float, other_peak: float, cfg: AnalysisConfig) -> PeakComparison:
    """Compare a cell's peak memory with the baseline's: the ratio and the direction;
    ValueError if a peak is negative or not finite, or the baseline's is zero.

    Args:
        base_peak, other_peak: peak bytes of the baseline and the cell.
        cfg: the analysis settings.
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
    """Steps, peaks and CPU times of `series` against its baseline's, and how busy the host was.

    Args:
        label: the baseline image's label, as reasons name it.
        rounds, good: the confirmation rounds asked for; they matter only if `good` within run.
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


def busy_reason(base_busy: float | None, other_busy: float | None,
                cfg: AnalysisConfig) -> str | None:
    """Why a round ran on a busy host (`rules.busy_run`), or None."""
    return busy_run(RoundEvidence(cfg, busy=(("baseline", base_busy),
                                             ("suspect", other_busy))))


def speed_reason(plain: float, scaled: float, speed: float | None,
                 cfg: AnalysisConfig) -> str | None:
    """Why a round at CPU speeds far apart is left out (rule `round-speeds`: its ratios as
    measured and at one speed fall on different sides of `min_ratio`), or None."""
    return speeds_apart(RoundEvidence(cfg, plain=plain, scaled=scaled, speed=speed))


def at_one_speed(base: RunStat, other: RunStat, cfg: AnalysisConfig
                 ) -> tuple[float, float, float | None, str | None]:
    """A round's two runs at one CPU speed: both step times, the suspect's speed over the
    baseline's, and why the speeds leave the round out, for live and saved rounds alike."""
    b_s, o_s, speed = speed_scaled(base, other)
    plain, scaled = _ratios(base, other, b_s, o_s)
    return b_s, o_s, speed, speed_reason(plain, scaled, speed, cfg)


def _ratios(base: RunStat, other: RunStat, b_s: float, o_s: float) -> tuple[float, float]:
    """The suspect's step time over the baseline's, as measured and at one CPU speed."""
    plain = other.net_s / base.net_s if base.net_s > 0 else math.nan
    return plain, o_s / b_s if b_s > 0 else math.nan


def cpu_ratio(base: RunStat, other: RunStat) -> float | None:
    """The suspect's CPU time per step over the baseline's (in canary loops where both
    timed it, else seconds; run-queue delay excluded); None without CPU time."""
    for b, o in ((base.work, other.work), (base.cpu_s, other.cpu_s)):
        if math.isfinite(b) and math.isfinite(o) and b > 0 and o > 0:
            return o / b
    return None


class Judged(NamedTuple):
    """A round as it counts (`judged`)."""

    base_s: float               # the baseline run's step time, at one CPU speed
    other_s: float              # the suspect run's
    speed: float | None         # the suspect's CPU speed over the baseline's
    cpu: float | None           # the CPU-time ratio (`cpu_ratio`)
    left_out: str | None        # why the round does not count; None: it counts
    note: str                   # a busy round that counts: why it does
    rule: str = ""              # the rule of `rules.ROUND_RULES` that decided


def judged(base: RunStat | None, other: RunStat | None, base_busy: float | None,
           other_busy: float | None, cfg: AnalysisConfig, failed: str = "") -> Judged:
    """A round as it counts: both step times at one CPU speed, the speed and CPU-time
    ratios, and the first rule of `rules.ROUND_RULES` that fires on it."""
    b_s, o_s, speed, cpu = 0.0, 0.0, None, None
    plain = scaled = math.nan
    if base is not None and other is not None and not failed:
        b_s, o_s, speed = speed_scaled(base, other)
        plain, scaled = _ratios(base, other, b_s, o_s)
        cpu = cpu_ratio(base, other)
    else:
        failed = failed or "a run measured no step"
    rule, named = first_of(RoundEvidence(
        cfg, failed, plain, scaled, speed,
        (("baseline", base_busy), ("suspect", other_busy)), cpu), ROUND_RULES)
    why = named if rule.says == LEFT_OUT else None
    note = (f"host busy, counted: CPU time per step {cpu:.2f}x agrees"
            if rule.id == "round-busy-agrees" and cpu is not None else "")
    return Judged(b_s, o_s, speed, cpu, why, note, rule.id)


def settled(conf: Confirmation, cfg: AnalysisConfig) -> bool:
    """Whether more rounds could change the answer (`rules.SETTLED_RULES`), asked after
    every round once two are usable: settled when a direction is decided, rounds
    disagree, or the interval lies wholly on the no-change side.
    """
    return first_of(SettledEvidence.of(conf, cfg), SETTLED_RULES)[0].says == SETTLED


def _span(indices: list[int]) -> str:
    return ", ".join(str(i) for i in indices)


def decide_rounds(rounds: list[Round], suspected: Direction,
                  cfg: AnalysisConfig, least: int = CONFIRM_ROUNDS) -> Confirmation:
    """Decide a suspected change from interleaved rounds: the direction ("~" unless
    `least` usable rounds or more all agree and the interval clears `min_ratio`),
    interval and deciding rounds.

    Args:
        rounds: the rounds run, in order; `excluded` ones are reported, not used.
        cfg: the analysis settings.
        least: the usable rounds a confirmation needs (fewer where fewer are asked for).
    """
    usable = [r for r in rounds if r.excluded is None and r.base_s > 0 and r.other_s > 0]
    left_out = [r for r in rounds if r not in usable]
    note = ""
    if left_out:
        note = "; left out: " + "; ".join(
            f"round {r.index} ({r.excluded or 'no step times'})" for r in left_out)
    ids = [r.index for r in usable]
    few, _ = first_of(ConfirmEvidence(cfg, [r.ratio for r in usable]), CONFIRM_RULES)
    if few.says == FEW_ROUNDS:
        return Confirmation(suspected, "~", math.nan, math.nan, math.nan, ids,
                            f"not confirmed: {len(usable)} usable round(s) of {len(rounds)}, "
                            f"2 needed{note}", list(rounds), rule=few.id)
    logs = np.log([r.ratio for r in usable])
    mean = float(logs.mean())
    sem = float(logs.std(ddof=1)) / math.sqrt(len(logs))
    t = t_ppf(0.5 + cfg.round_confidence / 2, len(logs) - 1)
    lo, hi = math.exp(mean - t * sem), math.exp(mean + t * sem)
    ratio = math.exp(mean)
    diff = abs(float(np.median([r.other_s - r.base_s for r in usable])))
    ratios = ", ".join(f"{r.ratio:.2f}" for r in usable)
    head = (f"rounds {_span(ids)}: ratios {ratios}, mean {ratio:.2f}x "
            f"({cfg.round_confidence:.0%} CI {lo:.2f}..{hi:.2f})")
    rule, _ = first_of(ConfirmEvidence(cfg, [r.ratio for r in usable], lo, hi, diff, least),
                       CONFIRM_RULES)
    if rule.id == "confirm-short":
        note = f"; {least} rounds must count to confirm it{note}"
    direction = cast(Direction, rule.says)
    verb: str
    if suspected == "~":     # rounds run because a cell ran on a busy host
        verb = "no change" if direction == "~" else direction
    elif direction == suspected:
        verb = "confirmed"
    elif direction == "~":
        verb = "not confirmed"
    else:
        verb = f"reversed ({direction})"
    return Confirmation(suspected, direction, ratio, lo, hi, ids,
                        f"{verb}: {head}{note}", list(rounds), rule=rule.id)
