"""Thresholds for the verdict statistics: every one is named here, once, with the default
the detection benchmark (`benchmarks/detection.py`) was tuned against. Eight of them
(`SETTABLE`) are a user's to set, from the `analysis:` block of matrix.yaml (a YAML key of
the same snake_case name) or `report --reanalyze --set analysis.KEY=VALUE`; the others are
harness's named constants, which only code (tests, benchmarks) builds otherwise. Values are checked
when the object is built, so a bad matrix fails before any container starts.

Example:
    >>> AnalysisConfig(alpha=0.01, leak_floor_bytes=4 * 2**20).min_ratio
    1.1
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

_MiB = float(2**20)

# What a user may set in `analysis:` (and with `--set`): how large a slowdown or a leak
# must be before it counts, and how sure the test must be. At most eight, on purpose: the
# rest tune the statistics themselves, and a verdict a user can move by any of thirty
# knobs is one nobody can read (issue 41).
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
        alpha: Significance level of every Mann-Whitney U test (slowdown within a run,
            step-time comparison between cells). asv uses 0.002.
        min_ratio: Median step-time ratio that counts as a slowdown or regression; the
            reciprocal counts as "faster".
        peak_min_ratio: Peak-memory ratio between cells that counts as higher/lower.
        peak_floor_bytes: Peak differences smaller than this are "~" whatever the ratio,
            so that small processes do not flap on a few pages.
        leak_floor_bytes: Growth over the measured span below this is never a leak.
        leak_floor_relative: The same floor relative to the series' median level; the
            larger of the two floors applies.
        noise_multiple: The floor is also at least this multiple of the interquartile
            range of successive differences over sqrt(2) (the series' noise band).
        drawdown_multiple: ... and at least this multiple of the largest fall from an
            earlier high (GC drops, arena trims): swings the series shows it can undo.
        confidence: Two-sided confidence level of the whole-span slope interval.
        late_confidence: Two-sided confidence level of the late-window slope interval.
            Lower than `confidence` because it is only asked once growth is proven.
        late_fraction: Share of the run's calls whose (binned) readings form the late
            window (at least 4 readings; `memory.late_points`).
        stall_fraction: A grown series is a plateau only when the late slope's upper
            bound is below this share of the whole-span slope.
        autocorrelation: Widen slope intervals for lag-1 autocorrelated residuals
            (GC sawtooth, allocator steps); without it stable series with level
            shifts are called leaks far more often.
        max_autocorrelation: Cap on the estimated lag-1 autocorrelation.
        min_samples: Fewer memory samples than this give "insufficient".
        max_points: Longer memory series are binned to this many medians before the
            O(n^2) Theil-Sen fit.
        step_window: Share of the step times in each of the early and late windows.
        min_step_samples: Fewer step times than this never give a slowdown.
        heap_floor_bytes: `leak_floor_bytes` for the glibc heap series, which after
            malloc_trim under PYTHONMALLOC=malloc has almost no noise (psleak decides
            2-11 KiB/call leaks in 200 calls from it).
        live_floor_bytes: The per-call floor, in every mode (not only early stop):
            growth whose slope interval lies wholly above it and does not slow down is
            never `ok` (a leak, or a cache still filling: `analysis.rules.steady_above`);
            a live look stops on `ok` only once every needed source's interval is below
            it. RSS and the cgroup are read by the total floors alone.
        live_min_growth_bytes: The per-call rule's least total growth, in bytes.
        live_decay_ratio: The per-call rule's last third must keep this share of the
            whole run's rate (a filling cache slows down).
        contention_share: A within-run slowdown whose late-minus-early step time rise
            is at least this share explained by the rise in run-queue delay (or cgroup
            throttling) per step is `ambiguous` (busy host), not a slowdown.
        busy_share: A confirmation round whose run-queue delay (or throttled time) is
            this share of its step time or more ran on a host too busy to measure and
            is left out. Below it the round's step time is corrected for the delay
            and the CPU speed (on this project's shared 2-core machine rounds at
            40-70 % delay still gave identical images 0.94-1.10x).
        speed_spread: A confirmation round whose two runs' CPU speeds (the agent's
            canary loop) are more than this factor apart, and whose ratio as measured
            and at one CPU speed fall on different sides of `min_ratio`, is left out
            and replaced, as a busy one is: scaling a step to one CPU speed assumes the
            step runs at the canary's speed, and a memory-bound step does not. On this
            project's shared 2-core machine the canary's speed between back-to-back
            runs was bimodal, within 0.84-1.13x, or 1.4-2.0x apart (36 of 128 rounds);
            cbor2 5.9.0's 128 KiB decode was no faster where its canary ran 1.6-1.8x
            faster, and its scaled rounds read 1.56x, 1.37x, 1.57x where its plain ones
            read 0.95x, 1.35x, 0.92x. A change far past the speeds' difference (lizard
            1.16.1, 3-5x) reads the same both ways and stands.
        recheck_share: Cells compared with their baseline get confirmation rounds,
            even when the pooled steps show no change, when either ran with this share
            of run-queue delay or more: load can hide a change as well as fake one.
        round_confidence: Two-sided confidence of the interval on the per-round
            ratio that must clear `min_ratio` to confirm a regression.
        peak_regression_ratio: A cell whose peak RSS is this many times the baseline's is
            a regression; between `peak_min_ratio` and this it is only reported
            ("higher"), since new framework releases routinely import more code.
        fill_share: The largest cache, arena or pool a run may still be filling, as a
            share of the source's level (its median bytes), and at most `fill_bytes`:
            growth is a leak only where no saturating fill that size or less fits it
            (its rate fell too little over the run for one; `analysis.memory.
            fill_check`, in the live decider too); else the cell is `ambiguous` and
            runs again, longer. 0 turns the check off (the rule before issue 37).
        fill_bytes: The cap on that fill in bytes (0: the check off as well).
        leak_large_bytes: Growth that matters on its own, whatever it is: a live look
            stops a run on a leak only once the leaking carrier grew this much (a
            cache that large is a finding too); below it the run goes on to its budget,
            which may still show the growth level off (issue 49: caches filling at
            KiB/call for a thousand calls were called leaks at call 100).
        ok_floor_bytes: A live look stops a run on `ok` only once every needed source's
            slope interval lies below this many bytes per call; else the run goes on to
            its budget, whose length the total-floor rule turns into sensitivity (a
            16 B/call leak passes the heap's 256 KiB floor in 16,000 calls: a third of
            a second for a 20 us step). psleak and pytest-memray reach 16 B/call.
        busy_min_ratio: A confirmation round that ran on a busy host counts only where
            CPU time per step and the wall clock both read no change, or both read a
            change past this ratio (either way): load inflates both by tens of percent
            on a shared core (a 1.16x confirmed beside a parallel test suite where a
            quiet run read 1.0x), never by a factor.
        live_ok_share: A live look stops a budgeted run on `ok` only once its measured
            phase has run this share of its length (its budget, and the least calls a
            slow step's run goes on to past it; or its cap): what a run has not reached
            it has not seen, and growth that starts later (a leak from call 300 of a 3
            ms step, at 0.4 s of a 5 s budget) reads flat until it starts (issue 61).
            The `ok` then says the part it covered. Where a run of its whole length
            would read a leak, so must the look: its leak rules need the whole slope (a
            Theil-Sen median over pairs of readings) above zero, which growth moves
            only where it started before 1/sqrt(2) of the run (half the pairs end past
            the start); a look reads its late third (`late_fraction`) flat too, which
            growth that started before s * (1 - (1 - 1/sqrt(2)) * late_fraction) of the
            run moves at share s: 0.72 at 0.8 (a leak from 60 % of a 5 s budget was
            stopped `ok` at 50 %; docs/benchmarks.md). 1: never stop on `ok`; 0: as
            soon as memory is flat.
        short_calls: A run its time budget ended after fewer calls than this (its
            steps slow) that reads a leak under `leak_large_bytes` runs again until it
            has made this many (rule `short`): a cache of as many entries as the run
            made calls fills like a leak for all of them, and the common caches hold
            128 to 1,024 entries (functools, re, LRUs of compiled objects), so a third
            of 2,000 calls past such a fill shows it stop (issue 49: dateparser's 504
            locales at 11-17 ms a miss, tf.function's traces at ~21 ms). 0: never.
        step_floor_s: Median step-time differences below this many seconds are never a
            slowdown or regression. 0 by default: a change is judged by its ratio
            against the rounds' measured noise at every step size (issue 85: a parser's
            search call 2.3x slower, 3.8 -> 8.5 us, read "no change" under a 10 us
            floor, and its users call it millions of times; pyperf and asv judge
            microsecond benchmarks by relative change too). docs/benchmarks.md has the
            A/A noise of the rounds by step size.
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
            ValueError: A field has the wrong type or lies outside its allowed range;
                the message names the field and the range.
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
    """Whether the host's other work stretched `own` seconds of a run's own time to
    `wall` seconds enough to say so: half as long again, and a second more (the live
    bar's "host busy", a check's and a marked test's `busy`)."""
    return wall >= 1.5 * own + 1.0


def _fmt(bound: float) -> str:
    if math.isinf(bound):
        return "inf"
    return f"{bound:g}"
