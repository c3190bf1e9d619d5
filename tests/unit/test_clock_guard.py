"""Every test file that reads a clock, and why it may (issue 88 item 6). Speed is claimed
in benchmarks/, never in a test: a test's verdict must not hang on how busy its host is.
A file that reads a clock must be listed here with its kind, and a listed file must
still read one:

- deadline: it waits for a condition and gives up at a deadline, so a broken run fails
  instead of hanging; the time itself is never asserted.
- bound: it asserts an upper bound that separates what is tested from a hang, a blow-up
  or a wait the code must not make, many times the time it takes (the reason names
  both); a busy host stretches the run, never by that much.
- scenario: the clock is the work of a scenario or a fake (a step that burns CPU or
  starts leaking after a while), not a measure of the code under test.
- record: times are kept to say what ran when (overlaps, order), not how long.
- data: a script kept as data (run by hand, outside the suite).
- truth: the figure a verdict is held to is measured in the test, beside the run and
  on the same host at the same load, never written down from another machine.
"""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
KINDS = ("deadline", "bound", "scenario", "record", "data", "truth")
CLOCK = re.compile(r"\btime\.(monotonic|perf_counter|process_time|thread_time|time|"
                   r"clock_gettime)(_ns)?\(|(?<![.\w])(monotonic|perf_counter|process_time"
                   r"|thread_time)(_ns)?\(\)|\bdatetime\.now\(|\btimeit\.|\bos\.times\(")

CLOCKS: dict[str, tuple[str, str]] = {
    "conftest.py": ("deadline", "a test that needs an engine waits for CI's ready file"),
    "agent/test_agent.py": ("deadline", "waits for the agent's measured phase"),
    "agent/test_agent_cost.py": ("deadline", "waits for the measured phase, then for the "
                                 "process group to be gone"),
    "agent/test_cell_time.py": ("scenario", "its steps and its fw_bytes burn a fixed CPU "
                                "time, the work whose share is read"),
    "agent/test_output_cap.py": ("bound", "the agent ends within 8 s of "
                                 "the teardown's last line, where waiting for an EOF on "
                                 "each pipe the child holds takes 10 s"),
    "agent/test_sigterm_at_fork.py": ("deadline", "waits for the forked child to be gone"),
    "faults/faultkit.py": ("deadline", "waits for a process or container to be gone"),
    "faults/test_fault_container.py": ("bound", "a call that never returns is killed at "
                                       "its 3 s deadline, its run under 60 s and the test "
                                       "under 120 s (a busy CI: 10.2 s); a flood of output "
                                       "is read in 60 s: a hang takes the 10-minute "
                                       "timeout"),
    "faults/test_fault_matrix.py": ("bound", "a hostile matrix is refused within 30 s of "
                                    "this process's CPU: an anchor bomb expanded takes "
                                    "hours"),
    "faults/test_fault_output.py": ("bound", "a 64 MiB line without a newline is skipped "
                                    "in 5 s of CPU: read whole it is 64 MiB in memory"),
    "integration/gpu_sim/sim_gpu.py": ("record", "the simulated GPU's start and end in "
                                       "its own report"),
    "integration/test_slurm_cluster.py": ("bound", "waits for its jobs (deadline), and "
                                          "Ctrl-C ends the sweep in 30 s where its cells "
                                          "run for minutes"),
    "integration/test_ssh_engine.py": ("deadline", "waits for the ssh server to listen"),
    "integration/test_watch.py": ("deadline", "waits for the registry to listen"),
    "unit/test_cli_conventions.py": ("deadline", "waits for the venv build to hold its "
                                     "lock"),
    "unit/test_cpu_per_test.py": ("scenario", "the generated tests burn a fixed CPU time"),
    "unit/test_docker_container.py": ("deadline", "waits for the fake engine's stats"),
    "unit/test_live.py": ("scenario", "its steps wait for the host's stop file up to a "
                          "deadline, and one starts leaking 1.6 s in"),
    "unit/test_podman.py": ("deadline", "waits for the fake engine's stats and the kill; "
                            "`now` for the cgroup watch"),
    "unit/test_quiet_prepare.py": ("record", "the fake runtime's runs and builds, when "
                                   "each was under way"),
    "unit/test_scheduler.py": ("record", "the fake runtime's runs, which GPU each held "
                               "when"),
    "unit/test_check_fill_room.py": ("scenario", "timeit sizes the steps' work to ~0.1 ms "
                                     "of this host's CPU; no time is asserted"),
    "unit/test_time_as_user.py": ("truth", "timeit takes the step's time as a user would, "
                                  "plain and under the quiet heap, beside the sweep; the "
                                  "figure printed is held nearer the first only where "
                                  "the two differ by 1.3x"),
    "unit/test_spec.py": ("bound", "an alias bomb is refused in 5 s of CPU: expanded it is 10^9 "
                          "nodes"),
    "unit/test_terminal.py": ("deadline", "waits for the pty's output"),
    "unit/test_warm_runs.py": ("deadline", "waits for a run to start and for the warm "
                               "interpreter to be gone"),
    "data/h100/1125/truth.py": ("data", "the H100 truth script, run by hand on the GPU"),
}


def _readers() -> set[str]:
    here = Path(__file__).resolve()
    return {p.relative_to(TESTS).as_posix() for p in TESTS.rglob("*.py")
            if p != here and "__pycache__" not in p.parts
            and CLOCK.search(p.read_text(encoding="utf-8"))}


def test_every_test_that_reads_a_clock_says_why_it_may() -> None:
    unlisted = sorted(_readers() - set(CLOCKS))
    assert not unlisted, (f"{unlisted} read a clock: a test asserts no speed (that is a "
                          "benchmark's, benchmarks/); list why it may in CLOCKS")


def test_every_listed_file_still_reads_a_clock_and_has_a_kind() -> None:
    stale = sorted(set(CLOCKS) - _readers())
    assert not stale, f"{stale} read no clock now: take them out of CLOCKS"
    assert all(kind in KINDS and reason for kind, reason in CLOCKS.values())


def test_the_guard_sees_each_way_a_clock_is_read() -> None:
    for text in ("t = time.monotonic()", "time.perf_counter_ns()", "now = monotonic()",
                 "datetime.now(timezone.utc)", "time.time()",
                 "min(timeit.repeat(stmt))", "os.times()"):
        assert CLOCK.search(text), text
    for text in ("time.sleep(1)", "state.monotonic_count", "elapsed_time()"):
        assert not CLOCK.search(text), text
