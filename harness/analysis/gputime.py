"""GPU-bound time: was the device busy for the extra time of a slowdown, and was its
clock held down?

The agent reads, at each step sample, the GPU's utilization (the share of NVML's last
sample period, 1/6 s to 1 s, in which a kernel ran), its SM clock and the clock-event
reasons (`harness/agent/nvml.py:Nvml.activity`). From them, for the early and late
windows of a run:

- device busy time per step: utilization x the interval's step time / its steps. A
  slowdown whose busy time per step rises by half the extra step time or more is
  GPU-bound: the device does more (or slower) work per call. The host's CPU time then
  rises too when it spin-waits (`torch.cuda.synchronize()` spins), which is why such a
  step is not called CPU-bound (`slowdown_label`).
- the SM clock (medians) and the power or thermal reasons seen late: a clock that fell
  5 % or more with such a reason is named ("GPU clock 1980 -> 1410 MHz, SW power cap").

`device_share` is the rule the CPU-speed correction (`harness.analysis.contention`)
uses to leave the device's busy time out of the CPU work it scales.

Pure: NumPy over a `Series`; None where the agent recorded neither utilization nor
clock (no NVML, an old driver, recordings from before issue 20).
"""

from __future__ import annotations

import math

import numpy as np

from harness.analysis.trends import CLOCK_REASONS, GpuTime, StepTrend
from harness.protocol.series import Series

__all__ = ["device_share", "gpu_evidence", "gpu_time", "reason_names", "slowdown_label"]


def reason_names(bits: int) -> tuple[str, ...]:
    """The power and thermal clock-event reasons in a reasons bitmask, in bit order."""
    return tuple(name for bit, name in sorted(CLOCK_REASONS.items()) if bits & bit)


def device_share(sample: dict[str, object]) -> float:
    """The share of a sample interval the device was busy (utilization / 100), 0 when
    the sample has no utilization."""
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
    """The device's busy time per step and SM clock in the early and late `window`
    share of the measured steps (the windows of `contention.explain`).

    Args:
        series: The run; its step samples carry `gpu_util`/`sm_mhz`/`clk_reasons`.
        window: Share of the steps in each of the early and late windows.
        extra_s: Late minus early median step time, seconds (the slowdown).

    Returns:
        The evidence, or None when no sample recorded utilization or clock.
    """
    cols = series.gpu_activity()
    if cols is None or not cols["steps"].size:
        return None
    end = np.cumsum(cols["steps"])
    start = end - cols["steps"]
    n = float(end[-1])
    width = max(1.0, math.floor(n * window))
    early, late = start < width, end > n - width
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
    """What a slowdown was bound by, with the device's evidence: a step whose GPU busy
    time rose with it is GPU-bound, even when the host's CPU time rose too (it
    spin-waited on the device), else `bound` ("CPU-bound" or "wait-bound") stands."""
    if gpu is None or not gpu.bound:
        return bound
    if bound == "CPU-bound":
        return "GPU-bound: the host spin-waits on the device"
    return "GPU-bound: the host waits on the device"


def gpu_evidence(gpu: GpuTime | None) -> str:
    """"; GPU busy ... ms/step ...; GPU clock ... MHz, <reason>" for a slowdown's
    reason, "" without evidence."""
    text = gpu.text if gpu is not None else ""
    return f"; {text}" if text else ""


def slowdown_words(steps: StepTrend, cpu: StepTrend | None, at_speed: bool,
                   gpu: GpuTime | None = None) -> str:
    """A slowdown in words: "late steps 1.41x early (p=8.5e-127, at one CPU speed); CPU
    time per step 1.56x (CPU-bound)", with the device's evidence where NVML answered."""
    text = f"late steps {steps.ratio:.2f}x early (p={steps.p_value:.2g}"
    text += ", at one CPU speed)" if at_speed else ")"
    if cpu is not None and not cpu.insufficient:
        # Half the wall-clock rise (in seconds) in CPU time: the step does more work;
        # less: it waits longer (sleep, lock, device).
        more_cpu = cpu.late_median_s - cpu.early_median_s
        more_wall = steps.late_median_s - steps.early_median_s
        bound = slowdown_label("CPU-bound" if more_cpu >= more_wall / 2 else "wait-bound", gpu)
        text += f"; CPU time per step {cpu.ratio:.2f}x ({bound})"
    return text + gpu_evidence(gpu)
