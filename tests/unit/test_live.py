"""Early-stop mode end to end on the local runtime: the host decides while the agent
runs and stops it through the control file; the end record is still written."""

from __future__ import annotations

import sys
from pathlib import Path

from harness import spec
from harness.orchestrator import sweep
from harness.runtimes.local import LocalRuntime
from harness.store import RunStore

LEAKY = '''
def setup(params):
    return {"keep": []}
def step(state):
    state["keep"].append(bytearray(16384))
'''
STEADY = '''
def setup(params):
    return {}
def step(state):
    bytearray(16384)
'''


def test_live_decision_stops_the_agent_early(tmp_path: Path) -> None:
    (tmp_path / "leaky.py").write_text(LEAKY)
    (tmp_path / "steady.py").write_text(STEADY)
    m = tmp_path / "m.yaml"
    m.write_text(f"name: live\nruntime: local\n"
                 f"defaults: {{max_iterations: 20000, min_iterations: 80, warmup: 10, "
                 f"sample_every: 5}}\nmatrix:\n  image: [{sys.executable}]\n"
                 f"  scenario: [leaky.py, steady.py]\n")
    matrix = spec.load(m)
    store = RunStore.open(tmp_path / "out", matrix.name, False)
    try:
        out = sweep(matrix, list(matrix.cells), LocalRuntime(tmp_path / "cache"), store,
                    lambda _: None, False)
    finally:
        store.unlock()
    by_id = {r.scenario.id: r for r in out.results.values()}
    leak, steady = by_id["leaky"], by_id["steady"]
    assert leak.verdict == "leak" and leak.live is not None and leak.live.verdict == "leak"
    assert steady.verdict == "ok" and steady.live is not None
    assert steady.live.verdict == "stable"
    for r in (leak, steady):
        assert r.end.status == "ok" and r.end.stopped_early is True
        assert r.live is not None
        assert 80 <= r.live.iterations <= r.summary.iterations < 20000
    assert leak.live.lo > 8000  # the bound on bytes/iteration is shown, near 16 KiB


SLOW_LEAKY = '''
import time
def setup(params):
    return {"keep": []}
def step(state):
    state["keep"].append(bytearray(16384))
    time.sleep(0.01)
'''


def test_a_live_stop_comes_within_a_few_calls_of_the_decision(tmp_path: Path) -> None:
    # GIVEN 10 ms steps sampled every 20 calls (the multidict-live example's shape)
    (tmp_path / "slow.py").write_text(SLOW_LEAKY)
    m = tmp_path / "m.yaml"
    m.write_text(f"name: live\nruntime: local\n"
                 f"defaults: {{max_iterations: 2000, min_iterations: 80, warmup: 5, "
                 f"sample_every: 20}}\nmatrix:\n  image: [{sys.executable}]\n"
                 f"  scenario: [slow.py]\n")
    matrix = spec.load(m)
    store = RunStore.open(tmp_path / "out", matrix.name, False)
    try:
        out = sweep(matrix, list(matrix.cells), LocalRuntime(tmp_path / "cache"), store,
                    lambda _: None, False)
    finally:
        store.unlock()
    (res,) = out.results.values()
    live = res.live
    # THEN calls-to-decision and calls-run are both recorded, a few calls apart: the
    # agent looks for the decision every 20 ms, not at its next sample 20 calls on
    assert live.verdict == "leak" and res.end.stopped_early is True
    assert live.calls_run == res.end.iterations == res.summary.iterations
    assert 0 <= live.calls_run - live.calls_to_decision <= 8, live
    assert f"decided live at call {live.calls_to_decision}" in res.reason
