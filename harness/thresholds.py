"""Thresholds for the verdict statistics, each named once with the default the detection
benchmark (`benchmarks/detection.py`) was tuned against. Users set the `SETTABLE` ones in
matrix.yaml's `analysis:` block or with `--set analysis.KEY=VALUE`. Values are checked on
construction, so a bad matrix fails before any container starts.

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
        alpha: Significance level of every Mann-Whitney U test (asv uses 0.002).
        min_ratio: Median step-time ratio that counts as a slowdown; its reciprocal, faster.
        peak_min_ratio: Peak-memory ratio between cells that counts as higher/lower.
        peak_floor_bytes: Peak differences below this are "~", so small processes don't flap.
        leak_floor_bytes: Growth over the measured span below this is never a leak.
        leak_floor_relative: The same floor relative to the median level; the larger applies.
        noise_multiple: The floor is at least this multiple of the series' noise band.
        drawdown_multiple: ... and of the largest fall from an earlier high (GC, trims).
        confidence: Two-sided confidence of the whole-span slope interval.
        late_confidence: The same for the late window; lower, asked once growth is proven.
        late_fraction: Share of the run's calls that form the late window.
        stall_fraction: A grown series is a plateau only when the late slope's upper bound is
            below this share of the whole-span slope.
        autocorrelation: Widen slope intervals for lag-1 autocorrelated residuals (GC
            sawtooth, allocator steps), else level shifts read as leaks.
        max_autocorrelation: Cap on the estimated lag-1 autocorrelation.
        min_samples: Fewer memory samples than this give "insufficient".
        max_points: Longer series are binned to this many medians before the O(n^2) fit.
        step_window: Share of the step times in each of the early and late windows.
        min_step_samples: Fewer step times than this never give a slowdown.
        heap_floor_bytes: `leak_floor_bytes` for the nearly noiseless glibc heap series.
        live_floor_bytes: Per-call floor: steady growth wholly above it is never `ok`
            (`analysis.rules.steady_above`), and a live look stops on `ok` only below it.
        live_min_growth_bytes: The per-call rule's least total growth, in bytes.
        live_decay_ratio: The per-call rule's last third must keep this share of the whole
            run's rate (a filling cache slows down).
        contention_share: A within-run slowdown this much explained by run-queue delay (or
            throttling) is `ambiguous`, not a slowdown.
        busy_share: A confirmation round with this share of run-queue delay is left out;
            below it the round is corrected for the delay and the CPU speed.
        speed_spread: A round whose runs' CPU speeds differ by more than this factor, and
            whose raw and speed-scaled ratios disagree, is replaced.
        recheck_share: Compared cells get confirmation rounds whenever either ran with this
            share of run-queue delay: load can hide a change as well as fake one.
        round_confidence: Confidence of the per-round ratio interval that must clear
            `min_ratio` to confirm a regression.
        peak_regression_ratio: A peak RSS this many times the baseline's is a regression;
            below it only "higher" (new releases routinely import more code).
        fill_share: The largest cache a run may still be filling, as a share of the median
            level: growth such a fill fits is `ambiguous` and reruns longer. 0: off.
        fill_bytes: The cap on that fill in bytes (0: the check off as well).
        leak_large_bytes: Growth a live look may stop on as a leak; below it the run goes
            on to its budget, where a cache may level off.
        ok_floor_bytes: A live look stops on `ok` only below this many bytes per call.
        busy_min_ratio: A busy round counts only where CPU time and wall clock agree (both
            no change, or both past this ratio): load inflates both, never by a factor.
        live_ok_share: A live look stops on `ok` only past this share of the run's length,
            since later growth reads flat until it starts. 1: never; 0: as soon as flat.
        short_calls: A short run reading a small leak reruns to this many calls (rule
            `short`): common caches hold up to ~1,024 entries and fill like leaks. 0: never.
        step_floor_s: Step-time differences below this are never a slowdown. 0: judged by
            ratio against the rounds' noise at every step size, as pyperf and asv do.
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
        """Return the growth floor in bytes for a series whose median level is given.

        Args:
            median_level: Median of the series in bytes.

        Returns:
            The larger of the absolute and the relative leak floor.
        """
        return max(self.leak_floor_bytes, self.leak_floor_relative * abs(median_level))


def host_busy(wall: float, own: float) -> bool:
    """Whether other work stretched `own` seconds of a run's time to `wall` enough to say
    so: half as long again, plus a second (the live bar's "host busy", a check's `busy`)."""
    return wall >= 1.5 * own + 1.0


def _fmt(bound: float) -> str:
    if math.isinf(bound):
        return "inf"
    return f"{bound:g}"
