"""Thresholds for the verdict statistics, each named once with the default the detection
benchmark (`benchmarks/detection.py`) was tuned against. `SETTABLE` ones are set in
matrix.yaml's `analysis:` or by `--set analysis.KEY=VALUE`; a bad one fails before any run.

Example:
    >>> AnalysisConfig(alpha=0.01, leak_floor_bytes=4 * 2**20).min_ratio
    1.1
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields

_MiB = float(2**20)

# What a user may set: how large a change must be to count, and how sure the test must be.
# Few on purpose: a verdict movable by thirty knobs is one nobody can read.
SETTABLE = ("alpha", "min_ratio", "step_floor_s", "peak_regression_ratio",
            "leak_floor_bytes", "heap_floor_bytes", "live_floor_bytes", "fill_share")

# (low, high, low_inclusive, high_inclusive) per field; bools are not range-checked.
_RANGES: dict[str, tuple[float, float, bool, bool]] = {
    "alpha": (0.0, 0.5, False, True),
    "min_ratio": (1.0, math.inf, True, False),
    "peak_min_ratio": (1.0, math.inf, True, False),
    "peak_floor_bytes": (0.0, math.inf, True, False),
    "leak_floor_bytes": (0.0, math.inf, True, False),
    "leak_floor_relative": (0.0, 1.0, True, True),
    "noise_multiple": (0.0, math.inf, True, False),
    "drawdown_multiple": (0.0, math.inf, True, False),
    "confidence": (0.5, 1.0, False, False),
    "late_confidence": (0.5, 1.0, False, False),
    "late_fraction": (0.1, 0.5, True, True),
    "stall_fraction": (0.0, 1.0, False, True),
    "max_autocorrelation": (0.0, 0.99, True, True),
    "min_samples": (6, math.inf, True, False),
    "max_points": (20, 100_000, True, True),
    "step_window": (0.05, 0.5, True, True),
    "min_step_samples": (8, math.inf, True, False),
    "step_floor_s": (0.0, math.inf, True, False),
    "peak_regression_ratio": (1.0, math.inf, True, False),
    "heap_floor_bytes": (0.0, math.inf, True, False),
    "live_floor_bytes": (0.0, math.inf, False, False),
    "live_min_growth_bytes": (0.0, math.inf, True, False),
    "live_decay_ratio": (0.0, 1.0, True, False),
    "contention_share": (0.0, 1.0, False, True),
    "busy_share": (0.0, 1.0, False, True),
    "recheck_share": (0.0, 1.0, False, True),
    "speed_spread": (1.0, math.inf, False, False),
    "round_confidence": (0.5, 1.0, False, False),
    "fill_share": (0.0, math.inf, True, False),
    "fill_bytes": (0.0, math.inf, True, False),
    "leak_large_bytes": (0.0, math.inf, False, False),
    "ok_floor_bytes": (0.0, math.inf, False, False),
    "short_calls": (0, math.inf, True, False),
    "live_ok_share": (0.0, 1.0, True, True),
    "busy_min_ratio": (1.0, math.inf, True, False),
}


@dataclass(frozen=True, slots=True)
class AnalysisConfig:
    """Thresholds for memory-trend, step-trend and between-cell decisions.

    Attributes:
        alpha: significance level of every Mann-Whitney U test (asv uses 0.002).
        min_ratio: median step-time ratio that counts as slower (its reciprocal, faster).
        peak_min_ratio, peak_floor_bytes: a peak ratio that counts; a difference under which
            peaks are "~", so small processes don't flap.
        leak_floor_bytes, leak_floor_relative: growth floors, absolute and of the median level.
        noise_multiple, drawdown_multiple: floor multiples of the noise band and the largest fall.
        confidence, late_confidence: two-sided, of the whole-span and late slope intervals.
        late_fraction: share of the run's calls that form the late window.
        stall_fraction: a plateau's late slope bound is under this share of the whole slope.
        autocorrelation, max_autocorrelation: widen slope intervals for GC sawtooth; its cap.
        min_samples: fewer memory samples than this give "insufficient".
        max_points: longer series are binned to this many medians before the O(n^2) fit.
        step_window: share of the step times in each of the early and late windows.
        min_step_samples: fewer step times than this never give a slowdown.
        heap_floor_bytes: `leak_floor_bytes` for the nearly noiseless glibc heap.
        live_floor_bytes: per-call floor: steady growth wholly above it is never `ok`
            (`analysis.rules.steady_above`), and a live look stops on `ok` only below it.
        live_min_growth_bytes, live_decay_ratio: the per-call rule's least total growth, and the
            share of the run's rate its last third keeps (a filling cache slows down).
        contention_share: a slowdown this much explained by run-queue delay is `ambiguous`.
        busy_share: a round with this share of run-queue delay is left out, else corrected.
        speed_spread: a round whose CPU speeds differ past this and whose ratios disagree is redone.
        recheck_share: either cell this busy gets rounds: load hides a change as well as fakes it.
        round_confidence: confidence of the per-round ratio interval that must clear `min_ratio`.
        peak_regression_ratio: a peak RSS this many times the baseline's is a regression, below
            it only "higher" (new releases routinely import more code).
        fill_share, fill_bytes: the largest cache still filling, as a share of the median level
            and in bytes: growth it fits is `ambiguous` and reruns longer (0: off).
        leak_large_bytes: growth a live look stops on; smaller, the run goes on (a cache levels).
        ok_floor_bytes: a live look stops on `ok` only below this many bytes per call.
        busy_min_ratio: a busy round counts only if CPU time and wall clock agree (both under or
            both past this ratio): load inflates both, never by a factor.
        live_ok_share: a live look stops on `ok` only past this share of the run (1: never),
            as later growth reads flat until it starts.
        short_calls: a short run reading a small leak reruns to this many calls (0: never):
            common caches hold up to ~1,024 entries and fill like leaks.
        step_floor_s: step-time differences below this are never a slowdown (0: ratio alone).
    """

    alpha: float = 0.002
    min_ratio: float = 1.1
    peak_min_ratio: float = 1.1
    peak_floor_bytes: float = 1 * _MiB
    leak_floor_bytes: float = 1 * _MiB
    leak_floor_relative: float = 0.001
    noise_multiple: float = 2.0
    drawdown_multiple: float = 1.0
    confidence: float = 0.99
    late_confidence: float = 0.80
    late_fraction: float = 1 / 3
    stall_fraction: float = 0.5
    autocorrelation: bool = True
    max_autocorrelation: float = 0.9
    min_samples: int = 10
    max_points: int = 200
    step_window: float = 0.25
    min_step_samples: int = 16
    step_floor_s: float = 0.0
    peak_regression_ratio: float = 1.5
    heap_floor_bytes: float = 256 * 1024
    live_floor_bytes: float = 128.0
    live_min_growth_bytes: float = 8192.0
    live_decay_ratio: float = 0.5
    contention_share: float = 0.5
    busy_share: float = 0.75
    recheck_share: float = 0.2
    speed_spread: float = 1.25
    round_confidence: float = 0.9
    fill_share: float = 0.5
    fill_bytes: float = 128 * _MiB
    leak_large_bytes: float = 256 * _MiB
    ok_floor_bytes: float = 16.0
    short_calls: int = 2000
    live_ok_share: float = 0.8
    busy_min_ratio: float = 1.5

    def __post_init__(self) -> None:
        """Check types and ranges of every field.

        Raises:
            ValueError: A field has the wrong type or is out of range (named in the message).
        """
        for field in fields(self):
            value = getattr(self, field.name)
            if field.type in ("bool", bool):
                if not isinstance(value, bool):
                    raise ValueError(
                        f"analysis.{field.name}: expected true or false, got {value!r}"
                    )
                continue
            integral = field.type in ("int", int)
            # bool is an int subclass; `confidence: true` in YAML must not pass as 1.
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                kind = "an integer" if integral else "a number"
                raise ValueError(f"analysis.{field.name}: expected {kind}, got {value!r}")
            if integral and not isinstance(value, int):
                raise ValueError(f"analysis.{field.name}: expected an integer, got {value!r}")
            low, high, low_in, high_in = _RANGES[field.name]
            above = value >= low if low_in else value > low
            below = value <= high if high_in else value < high
            if not (above and below and math.isfinite(value)):
                left = "[" if low_in else "("
                right = "]" if high_in else ")"
                raise ValueError(
                    f"analysis.{field.name}: {value!r} is outside the allowed range "
                    f"{left}{_fmt(low)}, {_fmt(high)}{right}"
                )

    def floor(self, median_level: float) -> float:
        """The growth floor in bytes: the larger of the absolute and the relative leak floor."""
        return max(self.leak_floor_bytes, self.leak_floor_relative * abs(median_level))


def host_busy(wall: float, own: float) -> bool:
    """Whether other work stretched `own` seconds of a run's time to `wall` enough to say
    so: half as long again, plus a second (the live bar's "host busy", a check's `busy`)."""
    return wall >= 1.5 * own + 1.0


def _fmt(bound: float) -> str:
    if math.isinf(bound):
        return "inf"
    return f"{bound:g}"
