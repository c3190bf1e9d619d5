"""A cell against its row's baseline, as frozen records: pooled step times and peaks
(`StepComparison`, `PeakComparison`), the interleaved rounds that confirm a suspected
change (`Round`, `Confirmation`), what the verdict reads of them (`Baseline`) and all
of it together as result.json keeps it (`VsBaseline`). `analysis.pooled` and `rounds`
compute them; this module needs neither NumPy nor SciPy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from harness.analysis.recordbase import Record

Direction = Literal["slower", "faster", "~"]


PeakDirection = Literal["higher", "lower", "~"]


@dataclass(frozen=True, slots=True)
class StepComparison(Record):
    """Step times of a cell against the baseline.

    Attributes:
        ratio: median(other) / median(base).
        p_value: Two-sided Mann-Whitney U p-value.
        direction: "slower"/"faster" when significant and beyond `min_ratio`, else "~".
        n_base: Number of baseline step times.
        n_other: Number of step times of the compared cell.
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
        direction: "higher"/"lower" when beyond `peak_min_ratio` and `peak_floor_bytes`,
            else "~".
    """

    ratio: float
    direction: PeakDirection
    rule: str = ""      # the rule of `rules.PEAK_RULES` that decided ("": before)


@dataclass(frozen=True, slots=True)
class Round(Record):
    """One baseline run and one suspect run, back to back.

    Attributes:
        index: 1-based round number.
        base_s: Median step time of the baseline run, seconds.
        other_s: Median step time of the suspect run, seconds.
        base_busy: Contention share of the baseline run (None: not recorded).
        other_busy: The same for the suspect run.
        excluded: Why the round does not count, or None.
        speed: The suspect run's CPU speed over the baseline run's (canary loop); the
            times are already scaled to one speed. None when not measured.
        base_sm_mhz: The baseline run's median GPU SM clock (MHz), beside the CPU
            speed: a GPU held down by power or heat slows the same work. None when
            NVML gave no clock.
        other_sm_mhz: The same for the suspect run.
        cpu_ratio: The suspect's CPU time per step over the baseline's
            (`rounds.cpu_ratio`): what lets a busy round count. None when not recorded.
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
        suspected: The pooled comparison's direction that was put to the test.
        direction: The confirmed direction, "~" when not confirmed.
        ratio: Geometric mean of the usable rounds' ratios (NaN without rounds).
        lo: Lower bound of its interval.
        hi: Upper bound of its interval.
        decided_by: Indices of the rounds that decided.
        reason: One line for the report.
        rounds: Every round, excluded ones included.
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
        """A direction decided by the rounds: the one the pooled test suspected, or any,
        where a busy host asked for them (suspected "~": no direction put to the test)."""
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
    """A cell against its row's baseline: pooled step times, CPU times and peak RSS,
    and the interleaved rounds when they ran.

    Attributes:
        baseline: The baseline image's label.
        direction: The rounds' direction when they ran; else "suspected slower" /
            "suspected faster" / "~" from a pooled change or a busy host; None when
            the pooled steps raised no doubt.
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
