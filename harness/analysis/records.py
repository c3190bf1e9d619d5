"""The analysis's results as plain frozen records (`Record`: each becomes JSON for
result.json): what a verdict rests on, and what it finds (`Finding`). None needs NumPy,
so the result model, the reports and search load them cheaply.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Literal


class Record:
    """A frozen result record: `to_dict` gives a JSON-ready dict; `json_extra` the derived
    values the stored form adds."""

    __slots__ = ()

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = asdict(self)  # type: ignore[call-overload]
        return out

    def json_extra(self) -> dict[str, object]:
        return {}


MemoryKind = Literal["leak", "plateau", "stable", "ambiguous", "insufficient"]


@dataclass(frozen=True, slots=True)
class MemoryTrend(Record):
    """Trend of one memory source over the measured iterations; bytes and bytes/call.

    `slope_*`/`late_*` bounds are intervals at `confidence`/`late_confidence`; `start`/`end`
    are medians of the first and last few samples; `autocorr` widened the intervals.
    """

    source: str
    n: int
    slope: float
    slope_lo: float
    slope_hi: float
    growth: float
    late_slope: float
    late_lo: float
    late_hi: float
    start: float
    end: float
    peak: float
    kind: MemoryKind
    floor: float = 0.0
    autocorr: float = 0.0
    missed: float | None = None   # bytes/call: the smallest steady leak the run could miss
    creep: bool = False           # ambiguous as steady growth under both floors (`memory`)


# Rates under this many bytes a call are said in bytes, where KiB would round to "+0.0".
SMALL_RATE = 1024.0


def kib(n: float, places: int = 1) -> str:
    """Bytes as signed KiB ("+5.4"), never "-0.0": the one KiB formatter."""
    return scaled(n, 1024.0, places)


def scaled(n: float, scale: float, places: int = 1) -> str:
    """`n / scale` signed, `places` decimals, never "-0.0" (`kib`, and MiB per call)."""
    return f"{round(n / scale, places) + 0.0:+.{places}f}"


# Rates from this many bytes a call are said in MiB ("+50.0 MiB/call", not five digits).
LARGE_RATE = float(1 << 20)


def per_call(rate: float) -> tuple[str, float]:
    """The unit (KiB, or MiB from 1 MiB a call) and scale a rate per call is said in."""
    return ("MiB", LARGE_RATE) if abs(rate) >= LARGE_RATE else ("KiB", 1024.0)


def rate_text(rate: float, places: int = 1) -> str:
    """A rate per call: "+5.4 KiB/call", or "+50.0 MiB/call" from 1 MiB a call."""
    unit, scale = per_call(rate)
    return f"{scaled(rate, scale, places)} {unit}/call"


def rate_words(rate: float, lo: float | None = None, hi: float | None = None,
               places: int = 1) -> str:
    """A rate per call in words, with its interval where given: "+5.4 KiB/call (CI
    +5.3..+5.5)"; in MiB from 1 MiB a call, in bytes under 1 KiB ("+84 B/call")."""
    if abs(rate) < SMALL_RATE:
        text, ci = f"{rate:+,.0f} B/call", (f"{lo:+,.0f}..{hi:+,.0f}" if lo is not None
                                            and hi is not None else "")
    else:
        _, scale = per_call(rate)
        text, ci = (rate_text(rate, places), f"{scaled(lo, scale, places)}.."
                    f"{scaled(hi, scale, places)}" if lo is not None and hi is not None
                    else "")
    return f"{text} (CI {ci})" if ci else text


def size(n: float) -> str:
    """Bytes in the largest binary unit that keeps a digit before the point."""
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale * (1 - 1e-9):     # a fitted 1 GiB may come out a hair under
            return f"{sign}{n / scale:.3g} {unit}" if n < 100 * scale else \
                f"{sign}{n / scale:.0f} {unit}"
    return f"{sign}{n:.0f} B"


def signed_size(n: float) -> str:
    """`size` with its sign: "+54.3 KiB", "-1.17 MiB"; the one signed size of reasons."""
    return ("+" if n >= 0 else "") + size(n)


def missed_text(rate: float | None, calls: int | None) -> str:
    """"no leak above 40 B/call in 1,000 calls" ("" when not known; without `calls`, no
    "in ... calls"): the smallest steady leak the run could have missed."""
    if rate is None or rate != rate or math.isinf(rate):
        return ""
    size = f"{rate:,.0f} B/call" if rate < 1024 else f"{rate / 1024:,.1f} KiB/call"
    return f"no leak above {size}" + (f" in {calls:,} calls" if calls is not None else "")


def human_seconds(seconds: float) -> str:
    """The one way a duration is written: 0.0000159 -> '15.9 µs', 0.0123 -> '12.3 ms',
    2.5 -> '2.5 s', 1234.5 -> '1,234 s' (three figures, so never '1e+03 µs')."""
    for scale, unit in ((1e6, "µs"), (1e3, "ms")):
        value = float(f"{seconds * scale:.3g}")
        if value < 1000:
            return f"{value:g} {unit}"
    return f"{seconds:.3g} s" if seconds < 999.5 else f"{seconds:,.0f} s"


@dataclass(frozen=True, slots=True)
class StepTrend(Record):
    """Early-versus-late comparison of per-iteration step times (seconds).

    With too few step times, `insufficient` is true, `slowdown` false and `p_value` 1.
    """

    n: int
    median_s: float
    early_median_s: float
    late_median_s: float
    ratio: float
    p_value: float
    slowdown: bool
    insufficient: bool = False
    trend_p: float = 1.0       # one-sided Kendall tau over bin medians: rising throughout
    came_back_at: int = 0      # the step the rise came back down at (not a slowdown), or 0
    rule: str = ""             # the rule of `rules.STEP_RULES` that decided ("": before it)


Kind = Literal["leak", "stable"]


@dataclass(frozen=True, slots=True)
class LiveDecision(Record):
    """A verdict reached while the cell was still running; rates in bytes/call."""

    verdict: Kind
    source: str
    iterations: int
    reason: str
    floor: float = 0.0
    lo: float = 0.0
    hi: float = 0.0
    mean_rate: float = 0.0
    growth: float = 0.0
    intervals: int = 0
    alpha: float = 0.0
    seconds: float = 0.0        # the measured phase's seconds at the decision (0: unknown)
    budget: float = 0.0         # the run's time budget in seconds (0: none)
    rule: str = ""              # the rule of `rules.LIVE_RULES` that decided

    def to_dict(self) -> dict[str, object]:
        """Return the fields as a JSON-ready dict (infinite bounds as None)."""
        out: dict[str, object] = asdict(self)
        for key in ("lo", "hi"):
            value = out[key]
            if isinstance(value, float) and not math.isfinite(value):
                out[key] = None
        return out


@dataclass(frozen=True, slots=True)
class LiveRun(LiveDecision):
    """The live decision: when the host decided vs how far the agent got before stopping."""

    calls_to_decision: int = 0
    calls_run: int = 0


@dataclass(frozen=True, slots=True)
class Explained(Record):
    """Contention per step (seconds) in the early and late windows of a run.

    Attributes:
        early_s, late_s: run-queue delay per step, early and late windows.
        throttle_rise_s: rise of the cgroup's throttled time per step, early to late.
        extra_s: late minus early median step time (the slowdown to explain).
        share: max(late_s - early_s, throttle_rise_s, slower_cpu_s) / extra_s (0 without);
            no sum, as a throttled thread's run-queue delay holds its throttled time.
        slower_cpu_s: step time a slower CPU accounts for (a busy sibling or lower clock).
        cpu_speed: late CPU speed over early (canary loop), None if not recorded.
    """

    early_s: float
    late_s: float
    throttle_rise_s: float
    extra_s: float
    share: float
    slower_cpu_s: float = 0.0
    cpu_speed: float | None = None

    @property
    def cause(self) -> str:
        """What the largest part of the rise was."""
        rises = {"run-queue delay": self.late_s - self.early_s,
                 "cgroup throttling": self.throttle_rise_s,
                 f"a slower CPU (canary loop {1 / (self.cpu_speed or 1):.2f}x)":
                     self.slower_cpu_s}
        return max(rises, key=rises.__getitem__)


@dataclass(frozen=True, slots=True)
class SlopeFit:
    """A Theil-Sen slope, its Sen interval and the autocorrelation that widened it."""

    slope: float
    lo: float
    hi: float
    autocorr: float


# NVML clock-event reasons for power or heat: a cause of "every call got slower" alone.
CLOCK_REASONS = {0x4: "SW power cap", 0x8: "HW slowdown", 0x20: "SW thermal slowdown",
                 0x40: "HW thermal slowdown", 0x80: "HW power brake"}
CLOCK_DROP = 0.95   # late SM clock at or under this share of the early one: it dropped


@dataclass(frozen=True, slots=True)
class GpuTime(Record):
    """The device behind a slowdown: busy time per step and SM clock, early vs late (None: no NVML).

    Attributes:
        extra_s: late minus early median step time (the slowdown), seconds.
        early_busy_s, late_busy_s, early_util, late_util, early_sm_mhz, late_sm_mhz: device
            busy seconds per step, median utilization (%) and median SM clock (MHz).
        reasons: the power and thermal clock-event reasons seen in the late window.
    """

    extra_s: float = 0.0
    early_busy_s: float | None = None
    late_busy_s: float | None = None
    early_util: float | None = None
    late_util: float | None = None
    early_sm_mhz: float | None = None
    late_sm_mhz: float | None = None
    reasons: tuple[str, ...] = ()

    @property
    def bound(self) -> bool:
        """GPU-bound: the device's busy time per step rose by half the slowdown or more."""
        if self.early_busy_s is None or self.late_busy_s is None or self.extra_s <= 0:
            return False
        return self.late_busy_s - self.early_busy_s >= self.extra_s / 2

    @property
    def clock_drop(self) -> bool:
        """The SM clock fell by 5 % or more from the early window to the late one."""
        return (self.early_sm_mhz is not None and self.late_sm_mhz is not None
                and self.early_sm_mhz > 0
                and self.late_sm_mhz <= CLOCK_DROP * self.early_sm_mhz)

    @property
    def text(self) -> str:
        """The evidence in words: "GPU busy 12.0 -> 24.1 ms/step (util 99% -> 100%); GPU
        clock 1980 -> 1410 MHz, SW power cap"."""
        parts: list[str] = []
        if self.early_busy_s is not None and self.late_busy_s is not None:
            util = (f" (util {self.early_util:.0f}% -> {self.late_util:.0f}%)"
                    if self.early_util is not None and self.late_util is not None else "")
            parts.append(f"GPU busy {_ms(self.early_busy_s)} -> {_ms(self.late_busy_s)} "
                         f"ms/step{util}")
        if self.early_sm_mhz is not None and self.late_sm_mhz is not None and (
                self.clock_drop or self.reasons):
            parts.append(f"GPU clock {self.early_sm_mhz:.0f} -> {self.late_sm_mhz:.0f} MHz"
                         + "".join(f", {r}" for r in self.reasons))
        return "; ".join(parts)


def _ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:.3g}" if ms < 100 else f"{ms:.0f}"


Direction = Literal["slower", "faster", "~"]


PeakDirection = Literal["higher", "lower", "~"]


@dataclass(frozen=True, slots=True)
class StepComparison(Record):
    """Step times of a cell against the baseline.

    Attributes:
        ratio, p_value: median(other) / median(base), and the two-sided Mann-Whitney p-value.
        direction: "slower"/"faster" when significant and beyond `min_ratio`, else "~".
        n_base, n_other: the number of step times of each.
    """

    ratio: float
    p_value: float
    direction: Direction
    n_base: int = 0
    n_other: int = 0
    rule: str = ""      # the rule of `rules.POOLED_RULES` that decided ("": before)


@dataclass(frozen=True, slots=True)
class PeakComparison(Record):
    """Peak memory of a cell against the baseline.

    Attributes:
        ratio: other_peak / base_peak.
        direction: "higher"/"lower" past `peak_min_ratio` and `peak_floor_bytes`, else "~".
    """

    ratio: float
    direction: PeakDirection
    rule: str = ""      # the rule of `rules.PEAK_RULES` that decided ("": before)


@dataclass(frozen=True, slots=True)
class Round(Record):
    """One baseline run and one suspect run, back to back.

    Attributes:
        base_s, other_s: median step time of each run, seconds, at one CPU speed.
        base_busy, other_busy: contention share of each run (None: not recorded).
        index, excluded: 1-based round number; why the round does not count, or None.
        speed: the suspect run's CPU speed over the baseline's (None: not measured).
        base_sm_mhz, other_sm_mhz: each run's median GPU SM clock (MHz; None: no clock).
        cpu_ratio: the suspect's CPU time per step over the baseline's, so a busy round counts.
    """

    index: int
    base_s: float
    other_s: float
    base_busy: float | None = None
    other_busy: float | None = None
    excluded: str | None = None
    speed: float | None = None
    base_sm_mhz: float | None = None
    other_sm_mhz: float | None = None
    cpu_ratio: float | None = None
    rule: str = ""      # the rule of `rules.ROUND_RULES` that decided ("": before it)

    @property
    def ratio(self) -> float:
        return self.other_s / self.base_s if self.base_s > 0 else math.nan

    def to_dict(self) -> dict[str, object]:
        """Return the fields and the ratio as a JSON-ready dict."""
        return {**Record.to_dict(self), "ratio": self.ratio}

    def json_extra(self) -> dict[str, object]:
        return {"ratio": self.ratio}


@dataclass(frozen=True, slots=True)
class Confirmation(Record):
    """What the rounds said about a suspected change.

    Attributes:
        suspected, direction: the pooled direction put to the test, and the confirmed one ("~").
        ratio, lo, hi: geometric mean of the usable rounds' ratios (NaN without), its interval.
        decided_by, rounds: the deciding rounds' indices, and every round, excluded included.
        reason: one line for the report.
    """

    suspected: Direction
    direction: Direction
    ratio: float
    lo: float
    hi: float
    decided_by: list[int]
    reason: str
    rounds: list[Round] = field(default_factory=list)
    seconds: float = 0.0        # what the rounds cost, wall clock
    rule: str = ""              # the rule of `rules.CONFIRM_RULES` ("": before it)

    def interval(self) -> str:
        """"1.52x (90% CI 1.31..1.76)" style, for tables; "-" without rounds."""
        if math.isnan(self.ratio):
            return "-"
        return f"{self.ratio:.2f}x (CI {self.lo:.2f}..{self.hi:.2f})"

    @property
    def confirmed(self) -> bool:
        """A direction the rounds decided: the suspected one, or any where a busy host
        asked for them (suspected "~")."""
        return self.direction != "~" and self.suspected in (self.direction, "~")

    def json_extra(self) -> dict[str, object]:
        return {"confirmed": self.confirmed}

    def to_dict(self) -> dict[str, object]:
        """Return the fields, `confirmed` and the rounds as a JSON-ready dict."""
        return {"suspected": self.suspected, "direction": self.direction,
                "confirmed": self.confirmed, "ratio": _num(self.ratio), "lo": _num(self.lo),
                "hi": _num(self.hi), "decided_by": list(self.decided_by),
                "reason": self.reason, "rounds": [r.to_dict() for r in self.rounds]}


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None


@dataclass(frozen=True, slots=True)
class VsBaseline(Record):
    """A cell against its row's baseline: pooled steps, CPU times, peak RSS and any rounds.

    Attributes:
        baseline: the baseline image's label.
        direction: the rounds' direction; else "suspected slower"/"faster"/"~" from the pooled
            steps or a busy host; None when nothing raised a doubt.
    """

    baseline: str
    steps: StepComparison | None = None
    cpu: StepComparison | None = None
    peak_rss: PeakComparison | None = None
    direction: str | None = None
    confirmation: Confirmation | None = None
    rule: str = ""      # the rule of `rules.DOUBT_RULES` that decided ("": before)

    @property
    def said_direction(self) -> str | None:
        """The direction the report shows: the rounds', else the pooled steps'."""
        if self.direction is not None:
            return self.direction
        return self.steps.direction if self.steps is not None else None


@dataclass(frozen=True)
class Baseline:
    """A cell measured against its row's baseline (pooled steps, peaks, rounds)."""

    label: str
    steps: StepComparison | None
    peaks: PeakComparison | None
    cpu: StepComparison | None = None
    busy: float = 0.0                          # worse of the two run-queue delay shares
    confirmation: Confirmation | None = None   # interleaved rounds, when they ran
    rounds: int = 0                            # rounds the cell's settings asked for


FindingKind = Literal[
    "leak",          # a memory source grows: the carrier, or another source beside it
    "slowdown",      # late steps slower than early ones
    "plateau",       # memory grew, then flattened
    "regression",    # worse than the row's baseline
    "busy-host",     # contention explains a slowdown
    "vs-baseline",   # what the confirmation rounds found
    "no-gpu",        # a GPU cell whose framework ran on the CPU (a flag: said in reasons)
    "heap-note",     # how the heap was read (mallinfo's 4 GiB wrap: a flag)
    "gpu-check",     # the GPU precheck or run-time CUDA evidence (unsupported, degraded, ...)
    "ended",         # how a cut-short run ended, with what memory did before it
    "note",          # anything else a reader should see
]
# Kinds a row comparison repeats in its reason: a reader must not miss them.
FLAG_KINDS: frozenset[str] = frozenset({"no-gpu", "heap-note"})


@dataclass(frozen=True, slots=True)
class Finding(Record):
    """One thing the analysis found about a cell, typed by `kind`; `text` is what a reader
    sees."""

    kind: FindingKind
    text: str

    def __str__(self) -> str:
        return self.text

    @property
    def flag(self) -> bool:
        return self.kind in FLAG_KINDS

    @classmethod
    def from_text(cls, text: str) -> Finding:
        """A finding as older result.json stored it: bare text, kind by its words."""
        head = text.split(":", 1)[0].strip()
        kinds: dict[str, FindingKind] = {
            "leak": "leak", "slowdown": "slowdown", "plateau": "plateau",
            "regression": "regression", "busy host": "busy-host", "no-gpu": "no-gpu",
            "heap": "heap-note", "unsupported": "gpu-check", "degraded": "gpu-check",
            "not-applicable": "gpu-check"}
        if head.startswith("vs "):
            return cls("vs-baseline", text)
        if text.startswith("unsupported pair"):
            return cls("gpu-check", text)
        return cls(kinds.get(head, "note"), text)
