"""The one decision of memory growth, as a property over generated series (issue 41):
what the live decider says at call k is what a fixed run of k calls with the same
samples gets, a run that goes on past a live look is decided on all its samples, and no
verdict contradicts its own figures. Bounded, with a fixed seed: seconds in CI;
`benchmarks/one_decision.py` runs it longer."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from seriesgen import Shape, shapes

from harness.analysis.decision import CellFacts, decide
from harness.analysis.memory import memory_reading
from harness.analysis.rules import steady_above_trend
from harness.analysis.sequential import LiveDecider, decided
from harness.protocol.ingest import Record
from harness.protocol.series import Series
from harness.runtimes.base import RunOutcome
from harness.thresholds import AnalysisConfig

CFG = AnalysisConfig()
OK = RunOutcome(exit_code=0)


def series_of(samples: list[dict[str, Any]], ended: bool) -> Series:
    end = {"type": "end", "status": "ok"} if ended else None
    return Series(header={"type": "header", "schema": 1}, end=end, samples=list(samples))


def check(shape: Shape) -> None:
    samples = shape.samples()
    decider = LiveDecider(CFG, 40, 10**6)
    fed: list[dict[str, Any]] = []
    for s in samples:
        fed.append(s)
        got = decider.feed(Record("sample", 0, s))
        if got is not None:
            # THEN the live look at call k is the fixed run of k calls' decision
            fixed = decided(memory_reading(series_of(fed, False), CFG, collected=False), CFG)
            assert fixed is not None and fixed.verdict == got.verdict, (shape, got, fixed)
            assert fixed.iterations == got.iterations, (shape, got, fixed)
            break
    # AND the verdict of all the samples is the fixed run's, live or not
    everything = series_of(samples, True)
    fixed_v = decide(CellFacts(CFG, everything, OK))
    assert fixed_v.verdict in ("ok", "leak", "plateau", "ambiguous"), fixed_v
    # AND no verdict contradicts its own figures
    for name, t in fixed_v.memory.items():
        if fixed_v.verdict == "ok" and name == "heap":
            assert not steady_above_trend(t, CFG), (shape, t)
            assert t.missed is None or t.missed > 0
    if fixed_v.verdict == "leak":
        assert fixed_v.carrier is not None
        assert fixed_v.memory[fixed_v.carrier.split("+")[0]].slope > 0, fixed_v


@pytest.mark.slow     # 40 examples, each runs decided
@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(shapes())
def test_live_at_k_is_the_fixed_run_of_k_and_no_verdict_contradicts_its_figures(
        shape: Shape) -> None:
    check(shape)


@settings(max_examples=10, deadline=None, derandomize=True, database=None)
@given(st.sampled_from((200.0, 400.0, 2048.0)), st.sampled_from((0.0, 64.0)))
def test_a_steady_leak_above_the_floor_is_never_ok(rate: float, noise: float) -> None:
    shape = Shape("leak", 1000, rate, 0.0, 1.0, noise, seed=1)
    v = decide(CellFacts(CFG, series_of(shape.samples(), True), OK))
    assert v.verdict == "leak", (rate, noise, v.reason)
