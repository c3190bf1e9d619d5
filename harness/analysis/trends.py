"""What one run shows over its own course, as frozen records: the trend of each memory
source (`MemoryTrend`) and of the step times (`StepTrend`), the live decision reached
while it ran (`LiveDecision`, `LiveRun`), and what lies behind a slowdown: contention
(`Explained`) or the GPU (`GpuTime`). `analysis.growth`, `sequential`, `contention` and
`contention` compute them; this module needs neither NumPy nor SciPy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

from harness.analysis.recordbase import Record

MemoryKind = Literal["leak", "plateau", "stable", "ambiguous", "insufficient"]


@dataclass(frozen=True, slots=True)
class MemoryTrend(Record):
    """Trend of one memory source over the measured iterations; bytes and bytes/call.

    `slope_lo`/`slope_hi` and `late_lo`/`late_hi` are confidence intervals at
    `AnalysisConfig.confidence` and `late_confidence`. `start`/`end` are medians of the
    first and last few samples, `peak` the largest sample, `floor` the growth floor
    applied, `autocorr` the residual lag-1 autocorrelation used to widen the intervals.
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
    creep: bool = False           # ambiguous as steady growth under both floors (`growth`)


# Rates under this many bytes a call are said in bytes (every rate in words, table or
# reason: one threshold), where KiB would round them to "+0.1" or "+0.0".
SMALL_RATE = 1024.0


def kib(n: float, places: int = 1) -> str:
    """Bytes as signed KiB, `places` decimals, never "-0.0" for tiny negative noise: the
    one KiB formatter of every report and answer ("+5.4", "+0.25")."""
    return scaled(n, 1024.0, places)


def scaled(n: float, scale: float, places: int = 1) -> str:
    """`n / scale` signed, `places` decimals, never "-0.0" (`kib`, and MiB per call)."""
    return f"{round(n / scale, places) + 0.0:+.{places}f}"


# Rates from this many bytes a call on are said in MiB, where KiB would run to five
# digits ("+51204.0 KiB/call" is "+50.0 MiB/call").
LARGE_RATE = float(1 << 20)


def per_call(rate: float) -> tuple[str, float]:
    """The unit a rate per call is said in, KiB or from 1 MiB a call on MiB, and its
    scale: `per_call(5 << 20)` is ("MiB", 1048576.0); for a figure and its interval."""
    return ("MiB", LARGE_RATE) if abs(rate) >= LARGE_RATE else ("KiB", 1024.0)


def rate_text(rate: float, places: int = 1) -> str:
    """A rate per call in KiB ("+5.4 KiB/call", "+0.0 KiB/call"), in MiB from 1 MiB a
    call on ("+50.0 MiB/call")."""
    unit, scale = per_call(rate)
    return f"{scaled(rate, scale, places)} {unit}/call"


def rate_words(rate: float, lo: float | None = None, hi: float | None = None,
               places: int = 1) -> str:
    """A rate per call in words, with its interval where given: "+5.4 KiB/call (CI
    +5.3..+5.5)", "+50.0 MiB/call (CI ...)" from 1 MiB a call, or in bytes under 1 KiB,
    where a KiB figure would round it to a digit or away ("+84 B/call (CI +83..+85)":
    issue 49's small leaks, never "+0.1 KiB/call (CI +0.1..+0.1)")."""
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
    """`size` with its sign, growth's or a fall's: "+54.3 KiB", "-1.17 MiB"; the one
    signed size of every reason."""
    return ("+" if n >= 0 else "") + size(n)


def missed_text(rate: float | None, calls: int | None) -> str:
    """"no leak above 40 B/call in 1,000 calls" ("" when not known): the smallest steady
    leak a run could have missed (`MemoryTrend.missed`); without `calls`, "no leak
    above 40 B/call"."""
    if rate is None or rate != rate or math.isinf(rate):
        return ""
    size = f"{rate:,.0f} B/call" if rate < 1024 else f"{rate / 1024:,.1f} KiB/call"
    return f"no leak above {size}" + (f" in {calls:,} calls" if calls is not None else "")


def human_seconds(seconds: float) -> str:
    """0.0000159 -> '15.9 µs', 0.0123 -> '12.3 ms', 2.5 -> '2.5 s'; 0.0009996 -> '1 ms'
    (rounded to three figures first, so never '1e+03 µs'); 1234.5 -> '1,234 s': the one
    way a duration is written, a call's or a run's."""
    for scale, unit in ((1e6, "µs"), (1e3, "ms")):
        value = float(f"{seconds * scale:.3g}")
        if value < 1000:
            return f"{value:g} {unit}"
    return f"{seconds:.3g} s" if seconds < 999.5 else f"{seconds:,.0f} s"


@dataclass(frozen=True, slots=True)
class StepTrend(Record):
    """Early-versus-late comparison of per-iteration step times (seconds).

    `insufficient` is true when there were too few step times to test, in which case
    `slowdown` is false and `p_value` is 1.
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
    """The live decision as the cell ran it: when the host decided vs how far the agent
    got before it stopped."""

    calls_to_decision: int = 0
    calls_run: int = 0


@dataclass(frozen=True, slots=True)
class Explained(Record):
    """Contention per step (seconds) in the early and late windows of a run.

    A throttled thread stays queued, so its run-queue delay already contains the
    throttled time; the larger of the two rises counts, never their sum.

    Attributes:
        early_s: Run-queue delay per step, early window.
        late_s: The same, late window.
        throttle_rise_s: Rise of the cgroup's throttled time per step, early to late.
        extra_s: Late minus early median step time (the slowdown to explain).
        share: max(late_s - early_s, throttle_rise_s, slower_cpu_s) / extra_s; 0
            without extra time.
        slower_cpu_s: Step time a slower CPU accounts for: the early CPU time per step
            times the rise of the canary loop's time (a busy hyperthread sibling or a
            lower clock slows the same work with no run-queue delay).
        cpu_speed: Late CPU speed over early (canary loop), None if not recorded.
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


# Clock-event reasons (nvmlClocksEventReasons) that hold a busy GPU's clock down for
# power or heat: a cause of "every call got slower" on its own.
CLOCK_REASONS = {0x4: "SW power cap", 0x8: "HW slowdown", 0x20: "SW thermal slowdown",
                 0x40: "HW thermal slowdown", 0x80: "HW power brake"}
CLOCK_DROP = 0.95   # late SM clock at or under this share of the early one: it dropped


@dataclass(frozen=True, slots=True)
class GpuTime(Record):
    """The device behind a slowdown: busy time per step and SM clock, early vs late
    (`harness.analysis.contention`).

    Attributes:
        extra_s: Late minus early median step time (the slowdown), seconds.
        early_busy_s: Device busy seconds per step (utilization x interval / steps),
            early window; None where NVML gave no utilization.
        late_busy_s: The same, late window.
        early_util: Median utilization (percent), early window; None if not recorded.
        late_util: The same, late window.
        early_sm_mhz: Median SM clock (MHz), early window; None if not recorded.
        late_sm_mhz: The same, late window.
        reasons: The power and thermal clock-event reasons seen in the late window.
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
        """The evidence in words: "GPU busy 12.0 -> 24.1 ms/step (util 99% -> 100%);
        GPU clock 1980 -> 1410 MHz, SW power cap"."""
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
