"""The step-time reading of one run, read once (`read_steps`): the trend a slowdown verdict
reads (`step_trend`) and everything said beside it. Pure NumPy.

Contention is measured by the agent (run-queue delay, throttling, CPU speed, GPU time), not
inferred from CPU time, which stays flat while a step waits; it can make a slowdown
`ambiguous`. A shared CPU's speed moves within a run enough to hide or fake a slowdown,
hence `at_one_speed`, which may only lower a slowdown; a rise that came back is none."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from harness.analysis.ranktests import kendall_increasing_p, mannwhitneyu_p
from harness.analysis.records import CLOCK_REASONS, Explained, Finding, GpuTime, StepTrend
from harness.analysis.rules import (
    BACK,
    FEW,
    LOAD_RULES,
    SLOWDOWN,
    STEP_RULES,
    VOIDED,
    LoadEvidence,
    Rule,
    StepEvidence,
    first_of,
)
from harness.analysis.rules import rose as rises
from harness.protocol.series import Series, shared
from harness.thresholds import AnalysisConfig


def windows(steps: np.ndarray, window: float) -> tuple[np.ndarray, np.ndarray]:
    """Masks of the sample intervals in the early and late windows (`window` of the steps
    each); an interval belongs to a window when it overlaps it."""
    end = np.cumsum(steps)
    start = end - steps
    n = float(end[-1])
    width = max(1.0, math.floor(n * window))
    return start < width, end > n - width


def _per_step(cols: dict[str, np.ndarray], mask: np.ndarray) -> tuple[float, float]:
    steps = float(cols["steps"][mask].sum())
    if steps <= 0:
        return 0.0, 0.0
    rq = float(np.nansum(cols["rq_s"][mask])) / steps
    thr = float(np.nansum(cols["thr_s"][mask])) / steps
    return rq, thr


@dataclass(frozen=True)
class OneSpeed:
    """A run's step times and CPU seconds per step, one per step, the CPU part put at the
    run's median CPU speed."""

    steps: np.ndarray
    cpu: np.ndarray


def at_one_speed(series: Series) -> OneSpeed | None:
    """Step times and CPU time per step at the run's median CPU speed: per interval the
    stepping thread's CPU time (less device spin) is scaled by the canary; waits are not.
    None without the canary and CPU time on every sample."""
    rows = [s for s in series.samples if s.get("src") == "step" and s.get("phase") == "measure"
            and s["dt"]]
    if not rows or not all(s.get("ref_s") and s.get("cpu_s") is not None for s in rows):
        return None
    r0 = float(np.median([s["ref_s"] for s in rows]))
    steps: list[np.ndarray] = []
    cpu: list[float] = []
    for s in rows:
        dt = np.asarray(s["dt"], dtype=np.float64)
        total, per_step = float(dt.mean()), float(s["cpu_s"]) / dt.size
        share, speed = float(_own_share(s.get("on_s", np.nan), s["cpu_s"])), r0 / float(s["ref_s"])
        # The stepping thread's CPU work less its spin on a busy device, which is no work.
        idle = total * (1.0 - device_share(s))
        in_step = min(min(per_step, total) * share, idle)
        work = min(share * per_step, idle)
        steps.append(dt * (((total - in_step) + in_step * speed) / total if total > 0 else 1.0))
        cpu.append(per_step - work + work * speed)
    return OneSpeed(np.concatenate(steps), np.concatenate([
        shared(c, s["dt"], s.get("rq_s")) for c, s in zip(cpu, rows, strict=True)]))


def explain(series: Series, window: float, extra_s: float,
            count_speed: bool = True) -> Explained | None:
    """Contention in the early and late `window` share of the measured steps, and the share of
    `extra_s` (late less early median step time) it explains; None if not recorded.

    Args:
        series: the run; its step samples carry `rq_s`/`thr_s`.
        count_speed: count a slower CPU as contention (False: times already at one speed).
    """
    cols = series.cols.contention
    if cols is None or not cols["steps"].size:
        return None
    early, late = windows(cols["steps"], window)
    e_rq, e_thr = _per_step(cols, early)
    l_rq, l_thr = _per_step(cols, late)
    slower_cpu, speed = 0.0, None
    ref, cpu = cols["ref_s"], cols["cpu_s"] / cols["steps"]
    if count_speed and np.isfinite(ref[early | late]).all() and np.isfinite(cpu[early]).all():
        e_ref, l_ref = float(np.median(ref[early])), float(np.median(ref[late]))
        if e_ref > 0 and l_ref > 0:
            speed = e_ref / l_ref
            slower_cpu = max(0.0, float(np.median(cpu[early])) * (l_ref / e_ref - 1.0))
    rise = max(l_rq - e_rq, l_thr - e_thr, slower_cpu)
    share = rise / extra_s if extra_s > 0 else 0.0
    return Explained(e_rq, l_rq, l_thr - e_thr, extra_s, share, slower_cpu, speed)


def busy_share(series: Series) -> float | None:
    """How busy the host was in the measured phase: the larger of the stepping thread's
    run-queue delay (or throttling) over step time and the process's queued share of its
    runnable time (capped at that queueing over step time); None if not recorded."""
    cols = series.cols.contention
    if cols is None:
        return None
    total = float(cols["dt_s"].sum())
    if total <= 0:
        return 0.0
    own = max(float(np.nansum(cols["rq_s"])), float(np.nansum(cols["thr_s"]))) / total
    rq_all, run_all = float(np.nansum(cols["rq_all_s"])), float(np.nansum(cols["run_all_s"]))
    every = rq_all / (rq_all + run_all) if rq_all + run_all > 0 else 0.0
    # Capped by what queueing could add to the steps: a mostly sleeping step has little
    # runnable time, so a few ms queued would read as a large share.
    return max(own, min(every, rq_all / total))


@dataclass(frozen=True, slots=True)
class RunStat:
    """One run's step time for comparing runs: medians over its intervals (NaN: not recorded).

    Attributes:
        net_s, cpu_s, wait_s: step time net of run-queue delay; its CPU part; the rest.
        ref_s, work: the canary loop's time (the CPU's speed); CPU time per step in loops.
        sm_mhz: the GPU's SM clock (MHz).
    """

    net_s: float
    cpu_s: float = float("nan")
    ref_s: float = float("nan")
    work: float = float("nan")
    wait_s: float = float("nan")
    sm_mhz: float = float("nan")


def run_stat(series: Series) -> RunStat | None:
    """The run's `RunStat` (the plain median without contention counters; None when
    nothing was measured), run-queue delay taken out per interval.
    """
    cols = series.cols.contention
    gpu = series.cols.gpu
    clocks = gpu["sm_mhz"][np.isfinite(gpu["sm_mhz"])] if gpu is not None else np.empty(0)
    mhz = float(np.median(clocks)) if clocks.size else float("nan")
    if cols is None:
        times = series.cols.steps
        return RunStat(float(np.median(times)), sm_mhz=mhz) if times.size else None
    if not cols["steps"].size:
        return None
    net = np.maximum((cols["dt_s"] - np.nan_to_num(cols["rq_s"])) / cols["steps"], 0.0)
    med = float(np.median(net))
    cpu = np.minimum(cols["cpu_s"] / cols["steps"], net)
    ref = cols["ref_s"]
    if not (np.isfinite(cpu).all() and np.isfinite(ref).all() and (ref > 0).all()):
        finite = cpu[np.isfinite(cpu)]
        return RunStat(med, float(np.median(finite)) if finite.size == cpu.size else math.nan,
                       sm_mhz=mhz)
    # Only the stepping thread's CPU time runs at the canary's speed (workers run on other
    # CPUs), and its spin on a busy device is no work.
    mine = cpu * _own_share(cols["on_s"], cols["cpu_s"])
    if gpu is not None:
        busy = np.clip(np.nan_to_num(gpu["gpu_util"]) / 100.0, 0.0, 1.0)
        mine = np.minimum(mine, cols["dt_s"] / cols["steps"] * (1.0 - busy))
    return RunStat(med, float(np.median(cpu)), float(np.median(ref)),
                   float(np.median(mine / ref)), float(np.median(net - mine)), mhz)


def _own_share(on_s: np.ndarray | float, cpu_s: np.ndarray | float) -> np.ndarray:
    """The stepping thread's share of the process's CPU time (1 where not recorded)."""
    on, cpu = np.asarray(on_s, dtype=np.float64), np.asarray(cpu_s, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(np.isfinite(on) & (cpu > 0), on / cpu, 1.0)
    return np.asarray(np.clip(share, 0.0, 1.0))


def speed_scaled(base: RunStat, other: RunStat) -> tuple[float, float, float | None]:
    """Both runs' step times, their CPU parts at one CPU speed (a wait does not run faster),
    and other's CPU speed over base's (None, times unscaled, without canary or CPU times).
    """
    usable = all(np.isfinite(x) for x in (base.work, other.work, base.wait_s, other.wait_s))
    if not usable:
        return base.net_s, other.net_s, None
    ref0 = float(np.sqrt(base.ref_s * other.ref_s))

    def scaled(r: RunStat) -> float:
        return r.wait_s + r.work * ref0

    return scaled(base), scaled(other), base.ref_s / other.ref_s


def sm_clocks(base: RunStat | None, other: RunStat | None) -> tuple[float | None, float | None]:
    """Both runs' median GPU SM clocks (MHz) for a round's record (None: not recorded)."""

    def clock(r: RunStat | None) -> float | None:
        return r.sm_mhz if r is not None and np.isfinite(r.sm_mhz) else None

    return clock(base), clock(other)


def reason_names(bits: int) -> tuple[str, ...]:
    """The power and thermal clock-event reasons in a reasons bitmask, in bit order."""
    return tuple(name for bit, name in sorted(CLOCK_REASONS.items()) if bits & bit)


def device_share(sample: dict[str, object]) -> float:
    """The share of a sample interval the device was busy (0 without utilization)."""
    util = sample.get("gpu_util")
    if isinstance(util, int | float) and not isinstance(util, bool) and math.isfinite(util):
        return min(1.0, max(0.0, float(util) / 100.0))
    return 0.0


def _median(values: np.ndarray) -> float | None:
    finite = values[np.isfinite(values)]
    return float(np.median(finite)) if finite.size else None


def _busy_per_step(cols: dict[str, np.ndarray], mask: np.ndarray) -> float | None:
    has = mask & np.isfinite(cols["gpu_util"])
    steps = float(cols["steps"][has].sum())
    if steps <= 0:
        return None
    return float((cols["gpu_util"][has] / 100.0 * cols["dt_s"][has]).sum()) / steps


def gpu_time(series: Series, window: float, extra_s: float) -> GpuTime | None:
    """The device's busy time per step and SM clock in `explain`'s windows (None: not recorded).

    Args:
        series: the run; its step samples carry `gpu_util`/`sm_mhz`/`clk_reasons`.
        extra_s: the slowdown: late minus early median step time, seconds.
    """
    cols = series.cols.gpu
    if cols is None or not cols["steps"].size:
        return None
    early, late = windows(cols["steps"], window)
    util = cols["gpu_util"]
    bits = 0
    for value in cols["clk_reasons"][late]:
        if math.isfinite(value):
            bits |= int(value)
    return GpuTime(extra_s=extra_s,
                   early_busy_s=_busy_per_step(cols, early),
                   late_busy_s=_busy_per_step(cols, late),
                   early_util=_median(util[early]), late_util=_median(util[late]),
                   early_sm_mhz=_median(cols["sm_mhz"][early]),
                   late_sm_mhz=_median(cols["sm_mhz"][late]),
                   reasons=reason_names(bits))


def slowdown_label(bound: str, gpu: GpuTime | None) -> str:
    """What a slowdown was bound by: GPU-bound where GPU busy time rose with it (even if
    CPU time rose too: it spin-waited), else `bound` ("CPU-bound" or "wait-bound")."""
    if gpu is None or not gpu.bound:
        return bound
    if bound == "CPU-bound":
        return "GPU-bound: the host spin-waits on the device"
    return "GPU-bound: the host waits on the device"


def gpu_evidence(gpu: GpuTime | None) -> str:
    """The device evidence for a slowdown's reason ("; GPU busy ..."), "" without it."""
    text = gpu.text if gpu is not None else ""
    return f"; {text}" if text else ""


def slowdown_words(steps: StepTrend, cpu: StepTrend | None, at_speed: bool,
                   gpu: GpuTime | None = None) -> str:
    """A slowdown in words: "late steps 1.41x early (p=8.5e-127, at one CPU speed); CPU
    time per step 1.56x (CPU-bound)", with the device's evidence where NVML answered."""
    text = f"late steps {steps.ratio:.2f}x early (p={steps.p_value:.2g}"
    text += ", at one CPU speed)" if at_speed else ")"
    if cpu is not None and not cpu.insufficient:
        # CPU time rising by half the wall-clock rise or more: more work; less: waiting.
        more_cpu = cpu.late_median_s - cpu.early_median_s
        more_wall = steps.late_median_s - steps.early_median_s
        bound = slowdown_label("CPU-bound" if more_cpu >= more_wall / 2 else "wait-bound", gpu)
        text += f"; CPU time per step {cpu.ratio:.2f}x ({bound})"
    return text + gpu_evidence(gpu)


@dataclass(frozen=True)
class StepReading:
    """What a run's step times showed: the trend (None without step times), CPU time per
    step, the contention and device time behind a slowdown, its words, what voids it, the
    calls of a longer look, and the notes."""

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


def load_rule(cfg: AnalysisConfig, share: float | None, extra_s: float,
              cpu: StepTrend | None) -> Rule[LoadEvidence]:
    """The first of `LOAD_RULES` for a slowdown of `extra_s` s a step: the share of it the
    contention explains, and CPU time per step's rise and (where a slowdown) ratio."""
    rise = cpu.late_median_s - cpu.early_median_s \
        if cpu is not None and not cpu.insufficient else None
    ratio = cpu.ratio if cpu is not None and cpu.slowdown else None
    return first_of(LoadEvidence(cfg, share, extra_s, rise, ratio), LOAD_RULES)[0]


def read_steps(series: Series, cfg: AnalysisConfig, first: bool = False) -> StepReading:
    """The step-time reading of one run. `first`: the cell's first attempt, whose slowdown
    asks for a run twice as long (`StepReading.rising`) where it fits `RISE_MAX_S`: a
    slowdown lasts, a cost that cycles with the input does not."""
    speed = at_one_speed(series)
    steps, at_speed, notes = _step_reading(series, cfg, speed)
    cpu = cpu_trend(series, cfg, speed) if steps is not None else None
    if steps is None or not steps.slowdown:
        return StepReading(steps, cpu, at_speed, notes=notes)
    extra = steps.late_median_s - steps.early_median_s
    gpu = gpu_time(series, cfg.step_window, extra)
    busy = explain(series, cfg.step_window, extra, count_speed=not at_speed)
    # Contention voids a slowdown only where the step did no more work (`LOAD_RULES`).
    load = load_rule(cfg, busy.share if busy is not None else None, extra, cpu)
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
    """The step-time trend a slowdown verdict reads. The CPU-speed correction may only lower
    the wall clock's reading; where the wall clock rose unsteadily or came back and the
    corrected rise lasts, the wall clock's slowdown stands.

    Returns:
        The trend (None without step times), whether it is the corrected one, and notes."""
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
        # The CPU's speed changed and at one speed the rise lasts: the wall clock's
        # figure stands (the correction may explain a fall away, as a rise).
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
        step_s: seconds per measured iteration, in order (warm-up dropped).
        cfg: the analysis settings.
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
    # A real slowdown rises bin after bin; a host drifting between regimes only happens to
    # end slower (`rules.STEP_RULES` asks both, and whether it came back).
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
    """Late steps slower than early ones (`rules.rose`); a slowdown must also rise bin
    after bin and last (`step_trend`)."""
    return rises(StepEvidence.of(t, cfg))


BACK_BINS = 20          # came_back: the run in this many bins ...
BACK_FROM = 0.6         # ... of which those from this share of the run on are read
BACK_SHARE = 0.5        # a bin back under this share of the rise ...
BACK_SE = 4.0           # ... by this many standard errors of its median
BACK_MIN_BIN = 25       # steps per bin at least (a MAD of fewer is no error bar)


def came_back(t: FloatArray, early_med: float, late_med: float) -> int:
    """The step index where a rise came back down late in the run, or 0: a bin in the last
    40% whose median lies under half the rise by `BACK_SE` standard errors. A slowdown
    lasts; a cost that cycles with the input falls again."""
    rise = late_med - early_med
    if rise <= 0 or t.size < BACK_BINS * BACK_MIN_BIN:
        return 0
    parts = np.array_split(t, BACK_BINS)
    starts = np.cumsum([0] + [p.size for p in parts])
    medians = [float(np.median(p)) for p in parts]
    # The spread about each bin's median, pooled over the run (one bin's MAD is too noisy).
    spread = [np.abs(p - m) for p, m in zip(parts, medians, strict=True)]
    mad = float(np.median(np.concatenate(spread)))
    line = early_med + BACK_SHARE * rise
    for i in range(int(BACK_BINS * BACK_FROM), BACK_BINS):
        se = 1.2533 * 1.4826 * mad / math.sqrt(parts[i].size)
        if medians[i] + BACK_SE * se <= line:
            return int(starts[i])
    return 0


def _monotone_p(t: FloatArray, max_bins: int = 20) -> float:
    """One-sided Kendall tau p-value that medians of consecutive bins (8 values each where
    there are enough) keep rising; p = 1 under 6 values, where no order is evidence.
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
