"""GPU-bound time: device busy time per step, SM clock and clock-event reasons behind a
slowdown, and the CPU-speed correction leaving a spin-wait on the device alone (GIVEN
agent records, WHEN within_run / run_stat, THEN verdict and evidence). A slowdown is
decided as one an earlier run of the cell read too (`replicated`; else rule `one-run`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.analysis.decision import within_run
from harness.analysis.records import GpuTime, Round
from harness.analysis.stepreading import (
    at_one_speed,
    gpu_time,
    reason_names,
    run_stat,
    slowdown_label,
    sm_clocks,
)
from harness.protocol.ingest import Series, parse_lines, read_samples
from harness.result.codec import decode, encode
from harness.runtimes.base import RunOutcome
from harness.thresholds import AnalysisConfig

CFG = AnalysisConfig()
OK = RunOutcome(exit_code=0)
H100 = Path(__file__).resolve().parents[2] / "data" / "h100"


def gpu_series(n: int = 600, every: int = 10, step: float = 0.0428, growth: float = 0.0,
               spin: bool = True, util: Any = 100, sm_mhz: Any = 1980, reasons: Any = 0,
               ref: Any = 1e-5) -> Series:
    """n measured steps of `step` s growing linearly by `growth` (share, over the run).

    `spin`: the stepping thread's CPU time is the whole step (it spins in
    torch.cuda.synchronize()); else 5 % of the first step's time. `util`, `sm_mhz`,
    `reasons`, `ref`: a value, or a function of the sample's last iteration (None: left
    out, as an agent without NVML)."""
    def at(v: Any, k: int) -> Any:
        return v(k) if callable(v) else v

    recs: list[dict[str, Any]] = [{"type": "header", "schema": 1}]
    for k in range(every, n + 1, every):
        dt = [step * (1 + growth * (k - every + j) / n) * (1 + 0.01 * ((j * 7) % 3 - 1))
              for j in range(every)]
        rec: dict[str, Any] = {
            "type": "sample", "src": "step", "phase": "measure", "i": k, "t": k * step,
            "heap": 120e6, "rss": 300e6, "uss": 250e6, "dt": dt, "rq_s": 0.0,
            "cpu_s": sum(dt) if spin else 0.05 * step * every, "ref_s": at(ref, k)}
        for key, value in (("gpu_util", util), ("sm_mhz", sm_mhz), ("clk_reasons", reasons)):
            if at(value, k) is not None:
                rec[key] = at(value, k)
        recs.append(rec)
    recs.append({"type": "end", "status": "ok", "iterations": n})
    return parse_lines([(json.dumps(r) + "\n").encode() for r in recs])


def faster_canary(k: int) -> float:
    """The canary loop 1.6x faster from mid-run on (the H100 case)."""
    return 1e-5 if k <= 300 else 1e-5 / 1.6


def test_flat_spinning_gpu_step_on_a_faster_cpu_is_not_a_slowdown() -> None:
    # GIVEN the H100 case: a 42.8 ms matrix-product step, flat throughout, the host
    # spinning in torch.cuda.synchronize() (CPU time = step time), the GPU ~100 % busy,
    # and the canary loop 1.6x faster from mid-run on
    s = gpu_series(util=lambda k: 99 + k % 2, ref=faster_canary)
    v = within_run(s, OK, CFG, replicated=True)
    # THEN the spin is not scaled by the CPU's speed: no slowdown
    assert v.verdict == "ok", v.reason
    assert v.steps is not None and v.steps.ratio == pytest.approx(1.0, abs=0.02)


def test_flat_step_recorded_without_utilization_is_not_a_slowdown() -> None:
    # GIVEN the same flat 42.8 ms step recorded without utilization (an older agent, no
    # NVML): the speed correction alone reads it as the false 1.55x of the H100 runs
    s = gpu_series(util=None, ref=faster_canary)
    speed = at_one_speed(s)
    assert speed is not None
    times = speed.steps
    assert float(times[300:].mean()) / float(times[:300].mean()) > 1.4
    # WHEN it is decided
    v = within_run(s, OK, CFG, replicated=True)
    # THEN the wall clock, flat, stands: ok, its trend the wall clock's
    assert v.verdict == "ok", v.reason
    assert v.steps is not None and v.steps.ratio == pytest.approx(1.0, abs=0.02)
    assert not v.has("slowdown")
    # AND the corrected reading stays visible as a note, never as a verdict
    notes = [f.text for f in v.findings if f.kind == "note"]
    assert any("no slowdown on the wall clock" in n and "at one CPU speed" in n
               for n in notes), notes


def test_a_wall_clock_slowdown_is_still_called_with_or_without_gpu_readings() -> None:
    # GIVEN a spinning 42.8 ms step 1.6x slower late on the wall clock, the canary flat
    for util in (None, 100):
        v = within_run(gpu_series(growth=0.6, util=util), OK, CFG, replicated=True)
        # THEN it is a slowdown, its figure the wall clock's
        assert v.verdict == "slowdown", (util, v.reason)
        assert v.steps is not None and v.steps.ratio > 1.4
    # AND a CPU that got faster mid-run does not inflate it: the correction only lowers
    wall = within_run(gpu_series(growth=0.6, util=None), OK, CFG, replicated=True)
    faster = within_run(gpu_series(growth=0.6, util=None, ref=faster_canary), OK, CFG,
                        replicated=True)
    assert faster.verdict == "slowdown" and "at one CPU speed" not in faster.reason
    assert faster.steps is not None and wall.steps is not None
    assert faster.steps.ratio == pytest.approx(wall.steps.ratio, rel=0.01)


def test_cpu_work_on_an_idle_gpu_is_still_put_at_one_cpu_speed() -> None:
    # GIVEN CPU-bound steps 2x slower late, the canary 2x slower too, the GPU idle
    s = gpu_series(step=0.001, growth=1.0, util=0, sm_mhz=375, reasons=1,
                   ref=lambda k: 1e-5 * (1 + k / 600))
    v = within_run(s, OK, CFG, replicated=True)
    # THEN as before issue 20: the same work at one CPU speed, not a slowdown
    assert v.verdict == "ok" and v.steps is not None and v.steps.ratio < 1.1
    # AND a wall-clock slowdown of CPU work on an idle GPU is called CPU-bound
    slower = within_run(gpu_series(step=0.001, growth=1.0, util=0), OK, CFG, replicated=True)
    assert slower.verdict == "slowdown" and "at one CPU speed" in slower.reason
    assert "CPU-bound" in slower.reason and "GPU-bound" not in slower.reason
    # AND more work hidden by a CPU that got faster (the wall clock flat) is no
    # slowdown: the correction can only lower what the wall clock shows
    hidden = within_run(gpu_series(step=0.001, util=0, ref=faster_canary), OK, CFG, replicated=True)
    assert hidden.verdict == "ok", hidden.reason
    assert any(f.kind == "note" and "at one CPU speed" in f.text for f in hidden.findings)


def test_half_busy_gpu_corrects_only_the_cpu_work_beyond_the_device_time() -> None:
    # GIVEN a 10 ms step that spins all along, the GPU busy 40 % of it, canary 1.6x faster
    s = gpu_series(step=0.01, util=40, ref=faster_canary)
    speed = at_one_speed(s)
    assert speed is not None
    times = speed.steps
    early, late = float(times[:300].mean()), float(times[300:].mean())
    # THEN only the 6 ms beyond the device's 4 ms are put at the run's median CPU speed
    r0 = (1e-5 + 1e-5 / 1.6) / 2
    want = (4 + 6 * r0 / (1e-5 / 1.6)) / (4 + 6 * r0 / 1e-5)
    assert late / early == pytest.approx(want, rel=0.01)
    # (all 10 ms scaled would give 1.6x)
    assert late / early < 1.4


def test_a_spinning_gpu_slowdown_is_gpu_bound_not_cpu_bound() -> None:
    # GIVEN 1 + k//100 matrix products per call (gpu_slowdown): the step 3x slower
    # late, the host spinning the whole time, the GPU 100 % busy
    s = gpu_series(growth=2.0, util=100)
    v = within_run(s, OK, CFG, replicated=True)
    assert v.verdict == "slowdown"
    assert "GPU-bound: the host spin-waits on the device" in v.reason
    assert "CPU-bound" not in v.reason
    g = v.gpu_time
    assert g is not None and g.bound and not (g.clock_drop and g.reasons)
    assert g.late_busy_s is not None and g.early_busy_s is not None
    assert g.late_busy_s / g.early_busy_s > 2.0
    assert "GPU busy" in v.reason and "ms/step (util 100% -> 100%)" in v.reason


def test_a_cpu_slowdown_beside_a_lightly_used_gpu_stays_cpu_bound() -> None:
    # GIVEN CPU work doubling while the GPU does the same small kernel per call: busy
    # time per step flat (utilization halves as the step doubles)
    s = gpu_series(step=0.002, growth=1.0, util=lambda k: int(30 / (1 + k / 600)))
    v = within_run(s, OK, CFG, replicated=True)
    assert v.verdict == "slowdown" and "CPU-bound" in v.reason
    assert v.gpu_time is not None and not v.gpu_time.bound


def test_a_power_capped_clock_drop_is_named() -> None:
    # GIVEN every call 1.4x slower late while the SM clock fell 1980 -> 1410 MHz under
    # the SW power cap (0x4)
    late = 300
    s = gpu_series(growth=0.6, util=100, sm_mhz=lambda k: 1980 if k <= late else 1410,
                   reasons=lambda k: 0 if k <= late else 0x4)
    v = within_run(s, OK, CFG, replicated=True)
    assert v.verdict == "slowdown", v.reason
    assert "GPU clock 1980 -> 1410 MHz, SW power cap" in v.reason
    assert v.gpu_time is not None and v.gpu_time.clock_drop and v.gpu_time.reasons
    assert v.gpu_time.reasons == ("SW power cap",)


def test_reason_names_and_labels() -> None:
    assert reason_names(0x1) == ()
    assert reason_names(0x4 | 0x40 | 0x80 | 0x8 | 0x20) == (
        "SW power cap", "HW slowdown", "SW thermal slowdown", "HW thermal slowdown",
        "HW power brake")
    bound = GpuTime(extra_s=0.01, early_busy_s=0.01, late_busy_s=0.02)
    assert slowdown_label("CPU-bound", bound).startswith("GPU-bound: the host spin-waits")
    assert slowdown_label("wait-bound", bound) == "GPU-bound: the host waits on the device"
    assert slowdown_label("CPU-bound", None) == "CPU-bound"
    flat = GpuTime(extra_s=0.01, early_busy_s=0.01, late_busy_s=0.012)
    assert not flat.bound and slowdown_label("CPU-bound", flat) == "CPU-bound"


def test_no_nvml_fields_give_no_gpu_evidence() -> None:
    s = gpu_series(growth=1.0, util=None, sm_mhz=None, reasons=None)
    assert gpu_time(s, 0.2, 0.01) is None
    v = within_run(s, OK, CFG, replicated=True)
    assert v.verdict == "slowdown" and v.gpu_time is None and "GPU" not in v.reason


def test_clock_only_gives_clock_evidence_without_busy_time() -> None:
    # GIVEN a driver that answers the clock but not utilization
    s = gpu_series(util=None, sm_mhz=lambda k: 1980 if k <= 300 else 1500)
    g = gpu_time(s, 0.2, 0.01)
    assert g is not None and g.early_busy_s is None and not g.bound
    assert g.clock_drop and not g.reasons and g.text == "GPU clock 1980 -> 1500 MHz"


def test_recorded_h100_gpu_slowdown_still_decides_slowdown_without_nvml_fields() -> None:
    # GIVEN the real H100 run (recorded before issue 20: no utilization or clock)
    s = read_samples(H100 / "gpu-real" / "cells" / "torch.gpu0.gpu_slowdown" / "samples.jsonl")
    assert s.cols.gpu is None
    v = within_run(s, OK, CFG, replicated=True)
    assert v.verdict == "slowdown" and v.gpu_time is None
    assert v.steps is not None and v.steps.ratio > 3


def test_gpu_time_and_round_clocks_round_trip_and_old_json_loads() -> None:
    g = GpuTime(0.02, 0.04, 0.06, 99.0, 100.0, 1980.0, 1410.0, ("SW power cap",))
    assert decode(GpuTime, encode(g)) == g
    r = Round(1, 0.01, 0.02, base_sm_mhz=1980.0, other_sm_mhz=1410.0)
    assert decode(Round, encode(r)) == r
    assert decode(Round, {"index": 1, "base_s": 0.01, "other_s": 0.02}).base_sm_mhz is None


def test_run_stat_spin_is_wait_and_clock_is_kept() -> None:
    # GIVEN a round's run that spins on a ~100 % busy GPU at 1755 MHz
    stat = run_stat(gpu_series(util=100, sm_mhz=1755))
    assert stat is not None and stat.sm_mhz == 1755
    # THEN none of its CPU time is work a faster CPU would move
    assert stat.work == pytest.approx(0.0) and stat.wait_s == pytest.approx(stat.net_s)
    assert sm_clocks(stat, None) == (1755, None)
    # AND on an idle GPU the CPU time is work, as before
    idle = run_stat(gpu_series(util=0))
    assert idle is not None and idle.wait_s == pytest.approx(0.0, abs=1e-9)
    assert idle.work == pytest.approx(idle.cpu_s / 1e-5)


@pytest.mark.parametrize("cell", sorted(
    str(p.relative_to(H100)) for p in H100.glob("gpu-*/cells/*/samples.jsonl")))
def test_every_recorded_h100_cell_decides_without_gpu_evidence(cell: str) -> None:
    # GIVEN each real H100 recording (made before the agent read utilization or clock)
    s = read_samples(H100 / cell)
    v = within_run(s, OK, CFG, replicated=True)
    # THEN it decides as before: no GPU evidence, no crash, and the speed correction
    # is the old one (no utilization: every CPU second counts as work)
    assert v.gpu_time is None and "GPU busy" not in v.reason
    assert s.cols.gpu is None
