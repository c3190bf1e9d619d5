"""A slowdown on a host whose CPU got faster mid-run (issue 49's corpus, freezegun
0.1.19: a CPU-bound step slowing 3.7x over its run read `ok`): the wall clock rose,
then fell where the CPU's speed changed, so it rose neither bin after bin nor for good;
at one CPU speed the rise lasts, and the wall clock's slowdown stands with its own
figure. The same fall with the CPU's speed unchanged (a cost that cycles with the input)
stays no slowdown."""

from __future__ import annotations

import json
from collections.abc import Callable

from harness.analysis.decision import within_run
from harness.protocol.ingest import Series, parse_lines
from harness.runtimes.base import RunOutcome
from harness.thresholds import AnalysisConfig

CFG = AnalysisConfig()
OK = RunOutcome(exit_code=0)
N, EVERY = 2000, 10


def cpu_bound(work: Callable[[int], float], speed: Callable[[int], float]) -> Series:
    """N CPU-bound steps (CPU time = step time) of `work(k)` seconds at the CPU's speed
    of call k (`speed(k)` times faster than at the start); the canary loop timed with it."""
    recs: list[dict[str, object]] = [{"type": "header", "schema": 1}]
    for k in range(EVERY, N + 1, EVERY):
        dt = [work(k - EVERY + j) / speed(k) * (1 + 0.02 * ((j * 7) % 5 - 2))
              for j in range(EVERY)]
        recs.append({"type": "sample", "src": "step", "phase": "measure", "i": k,
                     "t": k * 1e-3, "heap": 120e6, "rss": 300e6, "uss": 250e6, "dt": dt,
                     "rq_s": 0.0, "cpu_s": sum(dt), "ref_s": 1e-5 / speed(k)})
    recs.append({"type": "end", "status": "ok", "iterations": N})
    return parse_lines([(json.dumps(r) + "\n").encode() for r in recs])


def rising(k: int) -> float:
    return 1e-3 * (1 + 2 * k / N)            # 3x slower by the run's end


def faster_late(k: int) -> float:
    return 1.0 if k <= 1300 else 1.75        # a busy sibling left the core at call 1,300


def test_a_lasting_slowdown_whose_wall_clock_fell_with_the_cpus_speed_is_one() -> None:
    v = within_run(cpu_bound(rising, faster_late), OK, CFG, again=False, replicated=True)
    assert v.verdict == "slowdown", v.reason
    # THEN its figure is the wall clock's, not the corrected one's (the correction only
    # explains the fall away), and the note says what moved
    assert v.steps is not None and v.steps.ratio < 2.0 and "at one CPU speed" not in v.reason
    notes = [f.text for f in v.findings if f.kind == "note"]
    assert any("the CPU's speed changed in the run" in n for n in notes), notes


def test_the_same_fall_at_one_cpu_speed_is_a_cost_that_cycles_not_a_slowdown() -> None:
    # GIVEN the same steps, the CPU's speed unchanged: the work itself fell at call
    # 1,300 (a cost that cycles with the scenario's input)
    def work(k: int) -> float:
        return rising(k) / faster_late(k)
    v = within_run(cpu_bound(work, lambda k: 1.0), OK, CFG, again=False, replicated=True)
    assert v.verdict != "slowdown", v.reason
