"""Issue 78 point 1 and 2: a budget is spent in the cell's own time, and what the agent
reads is read as often, in calls, whatever the host's load.

- The agent's samples cost at most `SAMPLING_SHARE` of a budgeted run, however costly
  one sample is (a 2 ms one here: 400 of them would have been 0.8 s of a 1 s budget).
- Run-queue delay that other work imposes pushes the budget's end back: the steps get
  their budget of CPU on a core shared with a busy loop, and the end record says the
  cell's seconds (`cell_s`) beside the wall clock's.
- A pool's workers are read on every step sample, not on the 0.5 s timer alone.
- The allocator settings the host sets for the agent are put back for the processes
  the scenario starts (`HARNESS_CHILD_ENV`).

Each truth is read from the run's own records (its step times, its run-queue delay),
never from a figure of this machine.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_agent import run_agent, scenario, step_samples, times
from test_kids import POOL

from harness.runtimes.base import CHILD_ENV

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="/proc's schedstat and smaps_rollup are Linux's")

SHARE = 0.1     # stepper.SAMPLING_SHARE, what the issue asks
# stepper.MIN_SAMPLES: the samples a budget reads, whatever they cost (the agent's
# modules import each other by bare name: read from its text)
_MIN = re.search(r"^MIN_SAMPLES = (\d+)$", (Path(__file__).resolve().parents[2] / "harness"
                 / "agent" / "stepper.py").read_text(), re.M)
assert _MIN is not None
MIN_SAMPLES = int(_MIN.group(1))

# A cheap step whose every step sample costs ~2 ms (its fw_bytes, read on each).
COSTLY_SAMPLE = """
import time


def setup(params):
    return {}


def step(state):
    sum(range(50))


def fw_bytes(state):
    t = time.perf_counter() + 0.002
    while time.perf_counter() < t:
        pass
    return 0
"""

# A CPU-bound step of ~200 us, after a setup of 0.2 s of CPU.
SPIN = """
import time


def setup(params):
    t = time.thread_time() + 0.2
    while time.thread_time() < t:
        pass
    return {}


def step(state):
    t = time.thread_time() + 0.0002
    while time.thread_time() < t:
        pass
"""


def end_of(records: list[dict[str, Any]]) -> dict[str, Any]:
    return next(r for r in reversed(records) if r["type"] == "end")


def budgeted(budget: float) -> tuple[str, ...]:
    return ("--budget", str(budget), "--budget-min", "300", "--max-overhead", "0.05",
            "--quiet")


def test_samples_cost_at_most_a_tenth_of_the_budget(tmp_path: Path) -> None:
    # GIVEN a cheap step whose samples cost ~2 ms each, run for a 1 s budget
    script = scenario(tmp_path, COSTLY_SAMPLE)
    proc, records = run_agent(sys.executable, script, tmp_path, *budgeted(1.0),
                              iterations=10**7, warmup=20)
    assert proc.returncode == 0, proc.stderr
    end = end_of(records)
    measured = step_samples(records, "measure")
    # THEN the samples cost at most a tenth of the cell's time (a few samples' slack:
    # each is spaced on the mean cost of those before it, and the last one is taken
    # whatever it costs), in the cell's own time (less the run-queue
    # delay they met) and the writing of the step times apart (it grows with the calls,
    # not the samples), and there were still enough of them
    cost = end["sampling_own_s"]
    one = cost / len(measured)
    # (1.5 times the share: on a host at a load of 20 a sample also waits on the GIL
    # the timer thread holds, which no run-queue counter sees; and the MIN_SAMPLES a
    # budget reads whatever they cost: at a CI's load of ~14 the 2 ms samples cost
    # 8 ms, 41 of them 0.33 s. Before, 400 samples of 2 ms took 0.8 s of the 1 s)
    assert cost <= 1.5 * SHARE * end["cell_s"] + MIN_SAMPLES * one, (
        cost, end["cell_s"], len(measured))
    assert len(measured) >= 10
    # AND the budget was the cell's own seconds: its samples did not spend it
    assert end["cell_s"] >= 0.95, end
    assert 0.0 <= end["queued_out_s"] <= end["elapsed_s"], end


def spin_pinned(cpu: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\n"
         "while True: pass"])


def pinned_python(tmp_path: Path, cpu: int) -> str:
    """An interpreter that runs on CPU `cpu` alone (a script that pins, then execs)."""
    path = tmp_path / "pinned-python"
    path.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import os, sys; "
                    f"os.sched_setaffinity(0, {{{cpu}}}); "
                    "os.execv(sys.executable, [sys.executable] + sys.argv[1:])' \"$@\"\n")
    path.chmod(0o755)
    return str(path)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity")
def test_a_busy_core_stretches_the_wall_clock_not_the_steps_budget(tmp_path: Path) -> None:
    # GIVEN a CPU-bound step on one core that a busy loop shares with it
    cpu = min(os.sched_getaffinity(0))
    script = scenario(tmp_path, SPIN)
    loop = spin_pinned(cpu)
    try:
        proc, records = run_agent(pinned_python(tmp_path, cpu), script, tmp_path,
                                  *budgeted(1.0), iterations=10**6, warmup=5, timeout=120)
    finally:
        loop.kill()
        loop.wait()
    assert proc.returncode == 0, proc.stderr
    end = end_of(records)
    measured = step_samples(records, "measure")
    waited = sum(s.get("rq_s") or 0.0 for s in measured)
    steps = sum(sum(times(s)) for s in measured)
    # THEN the core was shared (the run's own run-queue delay says how much) ...
    assert waited > 0.2, waited
    # ... and the steps had their budget of the CPU anyway: their wall time less the
    # delay they waited in the run queue is about the budget, not the budget less it.
    # The samples' delay also holds what was queued while the agent sampled, at most
    # the sampling's wall time (CI, a core stretched 18x: steps 17.31 s, delay 16.73 s)
    assert steps - waited + end["sampling_s"] >= 0.8, (steps, waited, end)
    assert end["phases"]["measure"] >= end["cell_s"] + 0.8 * waited, end
    assert 0.9 <= end["cell_s"] <= 1.5, end
    # AND the run says what the host took outside its measured phase (the setup's 0.2 s
    # of CPU waited about as long for the shared core): an `overrun` bound gives it back
    assert 0.3 * end["phases"]["setup"] <= end["queued_out_s"] <= end["elapsed_s"], end
    # AND its own time, its life less all the delay it met, holds the measured phase's
    assert end["cell_s"] <= end["own_s"] <= end["elapsed_s"] + 1.0, end


def test_a_pools_workers_are_read_on_every_step_sample(tmp_path: Path) -> None:
    # GIVEN a pool of one worker, run for a 1 s budget
    script = scenario(tmp_path, POOL)
    proc, records = run_agent(sys.executable, script, tmp_path, *budgeted(1.0),
                              iterations=10**6, warmup=20)
    assert proc.returncode == 0, proc.stderr
    measured = step_samples(records, "measure")
    # THEN every step sample of the measured phase reads the workers, not the timer's
    # few (0.5 s apart: two in this run)
    with_kids = [s for s in measured if s.get("kids") is not None]
    assert len(measured) >= 10
    assert len(with_kids) >= len(measured) - 1, (len(with_kids), len(measured))


CHILD = """
import os
import subprocess
import sys


def setup(params):
    out = subprocess.run(
        [sys.executable, "-c", "import os; print(os.environ.get('PYTHONMALLOC', '-'))"],
        stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout.strip()
    return {"child": out, "own": os.environ.get("PYTHONMALLOC", "-")}


def step(state):
    pass


def info(state):
    return {"child": state["child"], "own": state["own"]}
"""


def test_the_processes_a_scenario_starts_allocate_as_for_a_user(tmp_path: Path) -> None:
    # GIVEN the agent run under PYTHONMALLOC=malloc, which the matrix did not ask for
    script = scenario(tmp_path, CHILD)
    proc, records = run_agent(sys.executable, script, tmp_path, iterations=5, warmup=1,
                              env={"PYTHONMALLOC": "malloc",
                                   CHILD_ENV: json.dumps({"PYTHONMALLOC": None})})
    assert proc.returncode == 0, proc.stderr
    header, end = records[0], end_of(records)
    # THEN the header says what the agent ran under, and a process the scenario started
    # has the user's allocator
    assert header["pythonmalloc"] == "malloc"
    assert end["info"] == {"child": "-", "own": "-"}


def test_a_short_budget_still_reads_thirty_times(tmp_path: Path) -> None:
    # GIVEN a marked test's budget (0.5 s) of a step whose samples cost ~8 ms each: a
    # tenth of it holds 6 of them, too few for any trend (min_samples is 10)
    script = scenario(tmp_path, COSTLY_SAMPLE.replace("0.002", "0.008"))
    proc, records = run_agent(sys.executable, script, tmp_path, *budgeted(0.5),
                              iterations=10**7, warmup=20)
    assert proc.returncode == 0, proc.stderr
    # THEN it still reads about 30 times in step with its budget (stepper.MIN_SAMPLES),
    # the share given up for that
    assert len(step_samples(records, "measure")) >= 25


def test_the_users_timing_pass_is_no_longer_than_the_measured_phase(tmp_path: Path) -> None:
    # GIVEN a run of a few fixed calls (a measured phase of milliseconds) and one whose
    # measured phase outlasts --as-user's seconds
    script = scenario(tmp_path, "def setup(params):\n    return {}\n\n\n"
                                "def step(state):\n    sum(range(50))\n")
    few, records = run_agent(sys.executable, script, tmp_path, "--as-user", "0.5",
                             "--quiet", iterations=60, warmup=5)
    assert few.returncode == 0, few.stderr
    end = end_of(records)
    # THEN the pass after the few calls steps for its floor, not --as-user's 0.5 s (a
    # fixed run of 60 calls is not timed for half a second after) ...
    # (a host busy enough to stretch the 60 calls past the floor times them as long)
    assert end["as_user"]["budget_s"] == max(0.25, round(end["phases"]["measure"], 3)) < 0.5, (
        end["phases"], end["as_user"])
    assert end["as_user"]["calls"] >= 3, end["as_user"]
    # ... and after a measured phase longer than --as-user's seconds, for those seconds
    long, records = run_agent(sys.executable, script, tmp_path, "--as-user", "0.3",
                              *budgeted(0.6), iterations=10**6, warmup=5)
    assert long.returncode == 0, long.stderr
    end = end_of(records)
    assert end["phases"]["measure"] >= 0.3, end
    assert end["as_user"]["budget_s"] == 0.3, end["as_user"]
