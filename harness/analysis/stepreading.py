"""The step-time reading of one run, read once (`read_steps`): the trend a slowdown
verdict reads and everything said beside it. A slowdown is the wall-clock trend
(`step_trend`); measured contention can make it `ambiguous`, the CPU-speed correction
can lower it but never make one (`step_reading`), a rise that came back is none
(`came_back`), and a first attempt's slowdown is looked at again in a longer run.
CPU time is evidence, not a veto: a step that waits longer slows with flat CPU time. The
correction may only lower (a flat 42.8 ms H100 step spinning on the device read 1.55x at
one CPU speed), yet it keeps a wall-clock rise that a CPU speeding up broke (a CPU-bound
step slowing 3.7x read `ok` where the host's CPU got 1.75x faster two thirds in). A cost
that cycles with the input comes back: an emoji shortcode cycle read `slowdown` 1.48x in
3 of 6 runs of a clean release."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from harness.analysis.contention import OneSpeed, at_one_speed, explain, gpu_time, slowdown_words
from harness.analysis.ranktests import kendall_increasing_p, mannwhitneyu_p
from harness.analysis.records import Explained, Finding, GpuTime, StepTrend
from harness.analysis.rules import (
    BACK,
    FEW,
    LOAD_RULES,
    SLOWDOWN,
    STEP_RULES,
    VOIDED,
    LoadEvidence,
    StepEvidence,
    first_of,
)
from harness.analysis.rules import rose as rises
from harness.protocol.series import Series
from harness.thresholds import AnalysisConfig


@dataclass(frozen=True)
class StepReading:
    """What a run's step times showed: the trend (None without step times) and CPU
    time per step, whether the trend is at one CPU speed, the contention and device
    time behind a slowdown, the slowdown in words, what voids it (a busy host), the
    calls of the run that looks at it again, and the notes said beside it."""

    steps: StepTrend | None = None
    cpu: StepTrend | None = None
    at_speed: bool = False
    busy: Explained | None = None
    gpu: GpuTime | None = None
    slowdown: str = ""
    voided: str = ""
    rising: int = 0
    notes: tuple[Finding, ...] = ()


FloatArray = npt.NDArray[np.float64]
RISE_MAX_S = 30.0       # the longest run that looks at a slowdown again, at the run's pace


def read_steps(series: Series, cfg: AnalysisConfig, first: bool = False) -> StepReading:
    """The step-time reading of one run. `first`: the cell's first attempt, whose
    slowdown asks for a run twice as long (`StepReading.rising`) where it fits
    `RISE_MAX_S` at the run's pace: a slowdown lasts through it, a cost that cycles with
    the input over a cycle longer than the run does not."""
    speed = at_one_speed(series)
    steps, at_speed, notes = _step_reading(series, cfg, speed)
    cpu = cpu_trend(series, cfg, speed) if steps is not None else None
    if steps is None or not steps.slowdown:
        return StepReading(steps, cpu, at_speed, notes=notes)
    extra = steps.late_median_s - steps.early_median_s
    gpu = gpu_time(series, cfg.step_window, extra)
    busy = explain(series, cfg.step_window, extra, count_speed=not at_speed)
    # Contention voids a slowdown only when the step did not do more work: CPU time per
    # step rising by half the extra time says it did, whatever the load (`LOAD_RULES`).
    cpu_rise = cpu.late_median_s - cpu.early_median_s \
        if cpu is not None and not cpu.insufficient else None
    cpu_ratio = cpu.ratio if cpu is not None and cpu.slowdown else None
    load, _ = first_of(LoadEvidence(cfg, busy.share if busy is not None else None, extra,
                                     cpu_rise, cpu_ratio), LOAD_RULES)
    voided = ""
    if busy is not None and load.says == VOIDED:
        voided = (f"busy host: {busy.cause} rose {busy.share * busy.extra_s * 1e6:.0f} "
                  f"us/step, {busy.share:.0%} of the {busy.extra_s * 1e6:.0f} us/step "
                  "slowdown")
    calls, pace = 2 * series.cols.calls, series.cols.pace
    rising = calls if (first and not voided and pace is not None
                       and calls * pace <= RISE_MAX_S) else 0
    return StepReading(steps, cpu, at_speed, busy, gpu,
                       slowdown_words(steps, cpu, at_speed, gpu), voided, rising, notes)


def step_reading(series: Series, cfg: AnalysisConfig
                 ) -> tuple[StepTrend | None, bool, tuple[Finding, ...]]:
    """The step-time trend a slowdown verdict reads: the one rule between the wall clock
    and the CPU-speed correction. The corrected series (`contention.at_one_speed`) may
    only lower the wall clock's reading, never raise it; where the wall clock rose but not
    bin after bin, or came back down, and at one CPU speed the rise lasts, the wall
    clock's slowdown stands. A corrected slowdown the wall clock does not show is a note.

    Returns:
        The trend (None without step times), whether it is the corrected one (its
        reason says "at one CPU speed"), and the notes: a corrected slowdown the wall
        clock did not show, a rise that came back (`came_back_note`)."""
    return _step_reading(series, cfg, at_one_speed(series))


def _step_reading(series: Series, cfg: AnalysisConfig, speed: OneSpeed | None
                  ) -> tuple[StepTrend | None, bool, tuple[Finding, ...]]:
    wall_times = series.cols.steps
    if not len(wall_times):
        return None, False, ()
    wall = step_trend(wall_times, cfg)
    if speed is None or not len(speed.steps):
        return wall, False, came_back_note(wall)
    corrected = step_trend(speed.steps, cfg)
    if corrected.ratio <= wall.ratio and (wall.slowdown or not corrected.slowdown):
        return corrected, True, came_back_note(corrected)
    if wall.slowdown or not corrected.slowdown:
        return wall, False, came_back_note(wall)
    if rose(wall, cfg):
        # The wall clock rose, late steps slower than early ones, but not bin after bin
        # (or it came back down) where the CPU's speed changed: at one CPU speed the
        # rise lasts. The wall clock's figure stands; the correction explains only the
        # fall away, as it may explain a rise away.
        return dataclasses.replace(wall, slowdown=True, came_back_at=0,
                                   rule=corrected.rule), False, (
            Finding("note", (
                f"the wall clock rose {wall.ratio:.2f}x, not bin after bin: the CPU's "
                "speed changed in the run, and at one CPU speed the rise lasts "
                f"({corrected.ratio:.2f}x)")),)
    return wall, False, (Finding("note", (
        f"no slowdown on the wall clock (late steps {wall.ratio:.2f}x early); at one CPU "
        f"speed {corrected.ratio:.2f}x, which the CPU-speed correction alone made: not a "
        "slowdown")),)


def cpu_trend(series: Series, cfg: AnalysisConfig, speed: OneSpeed | None
              ) -> StepTrend | None:
    """CPU time per step (at one CPU speed where the canary was timed), early vs late;
    None if the agent did not record it."""
    cpu = speed.cpu if speed is not None else series.cols.cpu
    if cpu is None or not len(cpu):
        return None
    return step_trend(cpu, cfg)


def step_trend(step_s: FloatArray, cfg: AnalysisConfig) -> StepTrend:
    """Test whether step times rise from the early to the late window.

    Args:
        step_s: Seconds per measured iteration, in order (warm-up already dropped).
        cfg: Supplies `step_window`, `min_step_samples`, `alpha` and `min_ratio`.

    Returns:
        The medians, late/early ratio, one-sided p-value and the slowdown flag.
    """
    t = np.asarray(step_s, dtype=np.float64)
    n = t.size
    if n == 0:
        return StepTrend(0, 0.0, 0.0, 0.0, 1.0, 1.0, False, True,
                         rule=first_of(StepEvidence(cfg, 0), STEP_RULES)[0].id)
    width = max(1, int(n * cfg.step_window))
    early, late = t[:width], t[n - width :]
    early_med, late_med = float(np.median(early)), float(np.median(late))
    ratio = late_med / early_med if early_med > 0 else 1.0
    few, _ = first_of(StepEvidence(cfg, n), STEP_RULES)
    if few.says == FEW:
        return StepTrend(n, float(np.median(t)), early_med, late_med, ratio, 1.0, False, True,
                         rule=few.id)
    p_value = mannwhitneyu_p(late, early, "greater")
    trend_p = _monotone_p(t)
    # A slowdown that grows per call (the rfft bug) rises bin after bin; a host that
    # drifts between fast and slow regimes only happens to end slower. Both tests, and
    # whether the rise came back, are rules of `rules.STEP_RULES`.
    back: list[int] = []

    def came_back_at() -> int:      # read once, where the table asks it
        if not back:
            back.append(came_back(t, early_med, late_med))
        return back[0]

    rule, _ = first_of(StepEvidence(cfg, n, p_value, ratio, late_med - early_med, trend_p,
                                     came_back_at), STEP_RULES)
    return StepTrend(n, float(np.median(t)), early_med, late_med, ratio, p_value,
                     rule.says == SLOWDOWN, trend_p=trend_p,
                     came_back_at=came_back_at() if rule.says == BACK else 0, rule=rule.id)


def rose(t: StepTrend, cfg: AnalysisConfig) -> bool:
    """Late steps slower than early ones (`rules.rose`: the Mann-Whitney p under
    `alpha`, the ratio past `min_ratio`, the medians `step_floor_s` apart); a slowdown
    also rises bin after bin and lasts (`step_trend`)."""
    return rises(StepEvidence.of(t, cfg))


BACK_BINS = 20          # came_back: the run in this many bins ...
BACK_FROM = 0.6         # ... of which those from this share of the run on are read
BACK_SHARE = 0.5        # a bin back under this share of the rise ...
BACK_SE = 4.0           # ... by this many standard errors of its median
BACK_MIN_BIN = 25       # steps per bin at least (a MAD of fewer is no error bar)


def came_back(t: FloatArray, early_med: float, late_med: float) -> int:
    """Where step times that rose from the early to the late window came back down
    late in the run (the step index of that bin), or 0 where they did not: a bin in the
    last 40% of the run whose median lies under half the rise by `BACK_SE` standard
    errors of that median. A slowdown lasts; a cost that cycles with the scenario's
    input rises and falls again."""
    rise = late_med - early_med
    if rise <= 0 or t.size < BACK_BINS * BACK_MIN_BIN:
        return 0
    parts = np.array_split(t, BACK_BINS)
    starts = np.cumsum([0] + [p.size for p in parts])
    medians = [float(np.median(p)) for p in parts]
    # The spread of a step about its bin's median, pooled over the run (one bin's own
    # MAD, from 25 steps, can come out half the true one)
    spread = [np.abs(p - m) for p, m in zip(parts, medians, strict=True)]
    mad = float(np.median(np.concatenate(spread)))
    line = early_med + BACK_SHARE * rise
    for i in range(int(BACK_BINS * BACK_FROM), BACK_BINS):
        se = 1.2533 * 1.4826 * mad / math.sqrt(parts[i].size)
        if medians[i] + BACK_SE * se <= line:
            return int(starts[i])
    return 0


def _monotone_p(t: FloatArray, max_bins: int = 20) -> float:
    """One-sided Kendall tau p-value that medians of consecutive bins keep rising.

    Bins hold 8 values where there are enough, else fewer (at least one), so a short
    series gets the exact test on 6+ bins; under 6 values there is no evidence (p = 1):
    six in perfect order give p = 1/720, the least p a short series can give.
    """
    bins = min(max_bins, max(t.size // 8, min(6, t.size)))
    if bins < 6:
        return 1.0
    medians = np.array([np.median(x) for x in np.array_split(t, bins)])
    p = kendall_increasing_p(medians)
    return p if p == p else 1.0  # NaN (all equal) -> no trend


def came_back_note(steps: StepTrend | None) -> tuple[Finding, ...]:
    """The note of a rise that came back (`came_back`), or none."""
    if steps is None or not steps.came_back_at:
        return ()
    return (Finding("note", (
        f"late steps {steps.ratio:.2f}x early, but back under half that rise from step "
        f"{steps.came_back_at:,} on: a cost that cycles with the scenario's input, not a "
        "slowdown that lasts")),)
