"""Issue 85 item 4: the CPU time per step is the step's alone.

- A pure-CPU step whose cost rises with the call count (call n loops n // 4 times): its
  CPU time per step rises as much as its wall time does (within 15 %), and early in the
  run it is no more than the wall time per step. Before, a budgeted run's CPU times were
  one per sample, and a window of a quarter of the samples, which the agent spaces in
  time, held half the steps: 7.4x on the wall clock read 2.8x in CPU time.
- A cheap flat step (about a microsecond): its CPU time per step is no more than its
  wall time per step. Before, the agent's loop between steps (two clock reads and its
  checks, as long as such a step) and the timer thread's readings were in it.

The truth is the step's work, from the calls its windows hold, and the run's own wall
clock, read from the same records.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from test_agent import run_agent, scenario

from harness.analysis.stepreading import step_trend
from harness.protocol.ingest import SeriesReader
from harness.protocol.series import Series
from harness.thresholds import AnalysisConfig

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="thread CPU clocks and schedstat are Linux's")

RISING = """
def setup(params):
    return {"n": 0}


def step(state):
    state["n"] += 1
    for _ in range(state["n"] // 4):
        pass
"""

CHEAP = """
def setup(params):
    return {"d": {1: 2}}


def step(state):
    state["d"].get(1)
    state["d"].get(1)
"""


def _run(tmp_path: Path, text: str, *extra: str) -> Series:
    """A run of `text` as the host reads it."""
    proc, _ = run_agent(sys.executable, scenario(tmp_path, text), tmp_path, *extra,
                        iterations=10_000_000, warmup=10, every=1000, timeout=120)
    assert proc.returncode == 0, proc.stderr
    reader = SeriesReader()
    for line in (tmp_path / "samples.jsonl").read_bytes().splitlines():
        reader.feed(line)
    return reader.finish()


def _series(tmp_path: Path, text: str, *extra: str) -> tuple[np.ndarray, np.ndarray]:
    """(wall seconds per step, CPU seconds per step) of a run of `text`."""
    cols = _run(tmp_path, text, *extra).cols
    assert cols.cpu is not None
    return cols.steps, cols.cpu


def test_a_rising_pure_cpu_steps_cpu_time_rises_as_its_work_does(tmp_path: Path) -> None:
    # GIVEN a pure-CPU step whose cost rises with each call (call n loops n // 4 times),
    # run for a budget
    series = _run(tmp_path, RISING, "--budget", "1.5", "--budget-min", "2000",
                  "--max-overhead", "0.005")
    cfg = AnalysisConfig()
    wall = series.cols.steps
    # WHEN its early and late windows are read from the wall clock and from CPU time
    assert series.cols.cpu is not None
    w, c = step_trend(wall, cfg), step_trend(series.cols.cpu, cfg)
    # THEN CPU time rises at least as the work does, within the CPU's own speed (the
    # windows' median calls, 10 warm-up calls before them, give the work): this 2-core
    # VM's CPU runs up to 1.6x slower for seconds while the other core is busy
    # (docs/benchmarks.md). Before, CPU time read 2.8x where the wall read 7.4x: 2.5x
    # under the work. How far above it a busy host moves the ratio is the host's (CI:
    # 8.2x quiet as the CPU warmed, 10.2x at a load of ~8, 8.8x and 32.6x at ~14, for
    # 7.0x the work; the 32.6x from early windows read at a quarter of their step time),
    # so it is not bounded here
    n = len(wall)
    work = ((10 + 7 * n // 8) // 4) / ((10 + n // 8) // 4)
    assert w.ratio > 3, w
    assert c.ratio > work / 1.7, (c.ratio, w.ratio, work)
    # AND early, a step's CPU time is no more than its wall time (within what sharing an
    # interval's CPU time among its steps, less its waits for a CPU, can be off by on a
    # busy host: 14 % beside two busy loops; before, 2.9x on a quiet one)
    assert c.early_median_s <= 1.2 * w.early_median_s, (c.early_median_s, w.early_median_s)


def test_a_cheap_steps_cpu_time_is_no_more_than_its_wall_time(tmp_path: Path) -> None:
    # GIVEN a flat step of about a microsecond, run for a budget
    wall, cpu = _series(tmp_path, CHEAP, "--budget", "0.5", "--max-overhead", "0.005")
    # THEN its CPU time per step is the step's, not the agent's loop's around it too
    assert float(np.median(cpu)) <= 1.15 * float(np.median(wall)), (
        float(np.median(cpu)) * 1e6, float(np.median(wall)) * 1e6)


def test_a_wait_for_a_cpu_between_steps_or_within_one_moves_no_steps_cpu_time(
        stepper: ModuleType) -> None:
    s = stepper.Stepper.__new__(stepper.Stepper)
    s.loop_s = None
    # GIVEN no interval yet that did not wait: both shares are the steps' of the wall
    # clock, as before (the loop's own time is not priced)
    assert s.shares(0.151, 0.100, 0.050, 100) == pytest.approx((0.100 / 0.151,) * 2)
    # AND then the loop priced by an interval that did not wait: 100 steps of 1 ms each
    # in 101 ms, so 10 us of the loop's own a step
    assert s.shares(0.101, 0.100, 0.0, 100)[0] == pytest.approx(0.100 / 0.101)
    # WHEN 50 ms of the interval is a wait for a CPU between two steps (the steps' own
    # seconds do not hold it), or within one (they do)
    between = s.shares(0.151, 0.100, 0.050, 100)
    within = s.shares(0.151, 0.150, 0.050, 100)
    # THEN either way the steps' share of the CPU time is theirs of the time not waited,
    # and the wait is the steps' only where it fell within one (the host subtracts it
    # from their times); before, the CPU share was the steps' share of the wall clock,
    # 0.66 between steps, a third of the steps' CPU time lost to a wait
    assert between == pytest.approx((0.100 / 0.101, 0.0))
    assert within == pytest.approx((0.100 / 0.101, 1.0))
    # AND without the thread's run-queue delay both are the steps' share of the wall
    assert s.shares(0.151, 0.100, None, 100) == pytest.approx((0.100 / 0.151,) * 2)
