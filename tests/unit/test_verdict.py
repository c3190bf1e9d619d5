"""Within-run verdicts from hand-built agent records (GIVEN series, WHEN within_run, THEN
verdict). Each is decided as a run whose slowdown an earlier run of the cell read too
(`replicated`): read in one run alone, a slowdown is rule `one-run`'s suspicion
(tests/unit/test_one_run_slowdown.py)."""

from __future__ import annotations

import json
import random
from typing import Any

from harness.analysis.decision import within_run
from harness.protocol.ingest import Series, parse_lines
from harness.runtimes.base import RunOutcome
from harness.thresholds import AnalysisConfig

CFG = AnalysisConfig()
OK = RunOutcome(exit_code=0)


def series(n: int = 600, every: int = 10, heap_leak: float = 0.0, rss_leak: float = 0.0,
           uss_leak: float | None = 0.0, step: float = 0.001, wall_growth: float = 0.0,
           cpu_growth: float | None = 0.0, seed: int = 1, rq_share: float | None = None,
           thr_share: float | None = None) -> Series:
    """n measured iterations; wall/cpu step times grow linearly by the given share.

    `rq_share`/`thr_share`: that share of each interval's extra wall time (over the
    first step's) was run-queue delay / cgroup throttling, as the agent records them."""
    rng = random.Random(seed)
    recs: list[dict[str, Any]] = [{"type": "header", "schema": 1}]
    for k in range(every, n + 1, every):
        dt = [step * (1 + wall_growth * (k - every + j) / n) * rng.uniform(0.97, 1.03)
              for j in range(every)]
        rec: dict[str, Any] = {
            "type": "sample", "src": "step", "phase": "measure", "i": k, "t": k * step,
            "rss": 300e6 + rss_leak * k + 4096 * rng.randint(-2, 2),
            "heap": 120e6 + heap_leak * k + rng.randint(-64, 64), "dt": dt}
        if uss_leak is not None:
            rec["uss"] = 250e6 + uss_leak * k + 4096 * rng.randint(-2, 2)
        if cpu_growth is not None:
            rec["cpu"] = [step * (1 + cpu_growth * (k - every + j) / n) for j in range(every)]
        extra = max(0.0, sum(dt) - every * step)
        if rq_share is not None:
            rec["rq_s"], rec["ivcs"] = rq_share * extra, int(rq_share * 10)
        if thr_share is not None:
            rec["thr_s"], rec["thr_n"] = thr_share * extra, int(thr_share * 10)
        recs.append(rec)
    recs.append({"type": "end", "status": "ok", "iterations": n})
    return parse_lines([(json.dumps(r) + "\n").encode() for r in recs])


def test_heap_leak_is_a_leak_carried_by_the_heap() -> None:
    v = within_run(series(heap_leak=16384), OK, CFG, replicated=True)
    assert v.verdict == "leak" and v.carrier == "heap"
    heap = v.memory["heap"]
    assert heap.slope_lo <= 16384 <= heap.slope_hi


def test_rss_growth_without_heap_or_uss_is_not_called_a_leak() -> None:
    # GIVEN RSS grows (file-backed pages, say) while USS and the heap stay flat
    v = within_run(series(rss_leak=16384, uss_leak=0.0), OK, CFG, replicated=True)
    assert v.verdict != "leak"


def test_rss_growth_with_no_uss_readings_is_ambiguous() -> None:
    v = within_run(series(rss_leak=16384, uss_leak=None), OK, CFG, replicated=True)
    assert v.verdict == "ambiguous" and "rss grows" in v.reason


def test_rss_and_uss_together_carry_a_leak() -> None:
    v = within_run(series(rss_leak=16384, uss_leak=16384), OK, CFG, replicated=True)
    assert v.verdict == "leak" and v.carrier == "uss+rss"


def test_a_step_that_waits_longer_is_a_slowdown_though_cpu_time_is_flat() -> None:
    # GIVEN a step whose sleep grows: wall time up, CPU time flat, no run-queue delay
    v = within_run(series(wall_growth=1.0, cpu_growth=0.0, rq_share=0.0, thr_share=0.0), OK,
                   CFG, replicated=True)
    assert v.verdict == "slowdown"
    assert "wait-bound" in v.reason
    assert v.cpu_steps is not None and v.cpu_steps.ratio < 1.05   # kept as evidence
    assert v.contention is not None and v.contention.share < 0.01


def test_cpu_bound_step_on_a_busy_host_is_ambiguous_with_the_reason() -> None:
    # GIVEN the extra wall time is all run-queue delay (other tasks had the CPU)
    v = within_run(series(wall_growth=1.0, cpu_growth=0.0, rq_share=0.9), OK, CFG, replicated=True)
    assert v.verdict == "ambiguous"
    assert "busy host: run-queue delay" in v.reason
    assert v.contention is not None and 0.8 < v.contention.share < 1.0
    assert v.to_dict()["contention"]["share"] == v.contention.share


def test_a_step_doing_more_work_on_a_busy_host_is_a_slowdown() -> None:
    """A CPU-bound step whose work grows 3x, on a host at load 15 on 2 cores: its wall
    time rises 3.3x, most of the extra is run-queue delay (a longer step waits longer),
    so CPU time rose by less than half the extra wall time; but CPU time per step,
    which holds no waiting, rose 2.2x on its own. test_explain's slow cell read
    `ambiguous` (busy host) beside other sessions' suites, CPU time 3.86x."""
    v = within_run(series(wall_growth=5.0, cpu_growth=2.0, rq_share=0.85), OK, CFG, replicated=True)
    assert v.verdict == "slowdown", v.reason
    assert v.cpu_steps is not None and v.cpu_steps.ratio > CFG.busy_min_ratio
    # CPU time rising by less than load can make it: still the busy host's
    v = within_run(series(wall_growth=5.0, cpu_growth=0.3, rq_share=0.85), OK, CFG, replicated=True)
    assert v.verdict == "ambiguous" and "busy host: run-queue delay" in v.reason


def test_contention_explaining_under_half_leaves_the_slowdown_standing() -> None:
    v = within_run(series(wall_growth=1.0, cpu_growth=1.0, rq_share=0.3), OK, CFG, replicated=True)
    assert v.verdict == "slowdown" and "CPU-bound" in v.reason


def test_rising_cgroup_throttling_makes_a_slowdown_ambiguous() -> None:
    v = within_run(series(wall_growth=1.0, cpu_growth=0.0, rq_share=0.0, thr_share=0.8), OK,
                   CFG, replicated=True)
    assert v.verdict == "ambiguous" and "cgroup throttling" in v.reason


def test_old_recordings_without_contention_fall_back_to_the_wall_clock() -> None:
    v = within_run(series(wall_growth=1.0, cpu_growth=0.0), OK, CFG, replicated=True)
    assert v.verdict == "slowdown" and v.contention is None


def test_wall_and_cpu_time_growing_together_is_a_slowdown() -> None:
    v = within_run(series(wall_growth=1.0, cpu_growth=1.0), OK, CFG, replicated=True)
    assert v.verdict == "slowdown"
    assert v.steps is not None and v.steps.ratio > 1.3


def test_without_cpu_records_wall_time_alone_decides() -> None:
    v = within_run(series(wall_growth=1.0, cpu_growth=None), OK, CFG, replicated=True)
    assert v.verdict == "slowdown"


def test_a_microsecond_steps_slowdown_is_named_by_its_ratio() -> None:
    # Issue 85: no absolute floor by default; a 1 us step twice as slow late as early
    v = within_run(series(step=1e-6, wall_growth=1.0, cpu_growth=1.0), OK, CFG, replicated=True)
    assert v.verdict == "slowdown", v.reason


def test_microsecond_steps_never_slow_down_below_a_floor_set() -> None:
    floored = AnalysisConfig(step_floor_s=1e-5)
    v = within_run(series(step=1e-6, wall_growth=1.0, cpu_growth=1.0), OK, floored,
                   replicated=True)
    assert v.verdict == "ok"


def test_sigkill_from_outside_is_a_crash_not_an_oom() -> None:
    v = within_run(series(), RunOutcome(exit_code=137, mem_limit_bytes=1 << 30,
                                    details={"host_max_usage": 100 << 20}), CFG)
    assert v.verdict == "crash" and "SIGKILL" in v.reason


def test_oom_killed_is_oom_and_keeps_the_partial_series() -> None:
    v = within_run(series(n=200), RunOutcome(exit_code=137, oom_killed=True,
                                         mem_limit_bytes=64 << 20), CFG)
    assert v.verdict == "oom" and "heap" in v.memory


def test_no_kernel_image_in_the_log_is_not_applicable() -> None:
    out = RunOutcome(exit_code=1, log_tail="CUDA error: no kernel image is available for "
                                           "execution on the device")
    assert within_run(series(), out, CFG).verdict == "not-applicable"


def test_missing_end_record_is_a_crash() -> None:
    s = series()
    s.end = None
    assert within_run(s, OK, CFG, replicated=True).verdict == "crash"


def test_a_cpu_that_got_slower_is_not_a_slowdown_of_the_step() -> None:
    # GIVEN CPU-bound steps 2x slower late with no run-queue delay, and the agent's
    # canary loop slower by as much (a busy hyperthread sibling, a lower clock)
    s = series(wall_growth=1.0, cpu_growth=None, rq_share=0.0)
    for rec in s.samples:
        rec["ref_s"] = 1e-5 * (1 + rec["i"] / 600)
        rec["cpu_s"] = sum(rec["dt"])
    v = within_run(s, OK, CFG, replicated=True)
    # THEN at one CPU speed the step did the same work throughout
    assert v.verdict == "ok" and v.steps is not None and v.steps.ratio < 1.1


def test_a_flat_wall_clock_on_a_cpu_that_got_faster_is_not_a_slowdown() -> None:
    # GIVEN wall time flat, but the canary says the CPU got 1.6x faster meanwhile (more
    # CPU work, or a spin on a device that no CPU makes faster: the same readings)
    s = series(wall_growth=0.0, cpu_growth=None, rq_share=0.0)
    for rec in s.samples:
        rec["ref_s"] = 1e-5 / (1 + 0.6 * rec["i"] / 600)
        rec["cpu_s"] = sum(rec["dt"])
    v = within_run(s, OK, CFG, replicated=True)
    # THEN a slowdown must show on the wall clock: the correction never makes one
    assert v.verdict != "slowdown" and not v.has("slowdown"), v.reason
    assert v.steps is not None and v.steps.ratio < 1.1
    # AND the corrected reading is said as a note
    assert any(f.kind == "note" and "at one CPU speed" in f.text for f in v.findings)


def test_more_cpu_work_on_a_busy_host_is_still_a_slowdown() -> None:
    # GIVEN CPU time per step rising with the wall time, and run-queue delay rising too
    v = within_run(series(wall_growth=1.0, cpu_growth=1.0, rq_share=0.9), OK, CFG, replicated=True)
    assert v.verdict == "slowdown" and "CPU-bound" in v.reason


def test_worker_thread_cpu_is_not_put_at_the_stepping_threads_speed() -> None:
    # GIVEN a thread-pool step (the stepping thread itself on a CPU 0 % of the time),
    # 2x slower late, while the stepping thread's canary also got 2x slower
    s = series(wall_growth=1.0, cpu_growth=None, rq_share=0.0)
    for rec in s.samples:
        rec["ref_s"] = 1e-5 * (1 + rec["i"] / 600)
        rec["cpu_s"], rec["on_s"] = sum(rec["dt"]), 0.0
    v = within_run(s, OK, CFG, replicated=True)
    # THEN the workers' time is left as measured: the slowdown stands
    assert v.verdict == "slowdown" and v.steps is not None and v.steps.ratio > 1.5
