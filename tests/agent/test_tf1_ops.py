"""The agent's TF1 per-op times (attribution.TF1Ops) on fake step stats: what a window
says of an op when one traced call of a cheap op was preempted.

The real graphs run in tests/integration/test_attribution_tf1.py (docker, TF 1.15);
here the session and its step stats are plain objects, so the figures are exact.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from loadfile import load_file

AGENT_DIR = Path(__file__).resolve().parents[2] / "harness" / "agent"


def _ops_of(calls: list[dict[str, int]], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Run `calls` (node -> microseconds, one dict a Session.run) through TF1Ops' wrapper
    as planned steps (early window: the first quarter, late: the last), every call in
    them traced."""
    monkeypatch.setenv("HARNESS_OPS_EVERY", "1")
    compat_v1 = SimpleNamespace(RunOptions=lambda trace_level: SimpleNamespace(),
                                RunMetadata=lambda: SimpleNamespace(step_stats=None))
    compat_v1.RunOptions.FULL_TRACE = 3   # type: ignore[attr-defined]
    tf = ModuleType("tensorflow")
    tf.compat = SimpleNamespace(v1=compat_v1)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tensorflow", tf)
    attribution = load_file(AGENT_DIR / "attribution.py", "attribution_probe")
    step = {"i": 0}

    class BaseSession:
        graph = None

        def run(self, fetches: Any, options: Any = None, run_metadata: Any = None) -> None:
            if run_metadata is None:      # a call outside the windows: not traced
                return
            times = calls[step["i"]]
            run_metadata.step_stats = SimpleNamespace(dev_stats=[SimpleNamespace(
                device="/job:localhost/replica:0/task:0/device:CPU:0",
                node_stats=[SimpleNamespace(node_name=n, timeline_label=f"{n} = Op{n}()",
                                            all_end_rel_micros=us)
                            for n, us in times.items()])])

    session = SimpleNamespace(BaseSession=BaseSession)
    ctx = SimpleNamespace(count=len(calls), budget=0.0, least=0,
                          progress=lambda: step["i"])
    ops = attribution.TF1Ops(ctx, session)
    for i in range(len(calls)):
        step["i"] = i
        session.BaseSession.run(BaseSession(), "total")
    rec: dict[str, Any] = ops.end(len(calls))
    return {o["name"]: o for o in rec["ops"]}


def test_one_preempted_call_of_a_cheap_op_does_not_outgrow_the_op_that_grew(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN an FFT whose time doubles from the early to the late window (5 calls each),
    # and a cheap op whose one late call was preempted for 10 ms (a busy host)
    early = [{"fft": us, "abs": 30} for us in (200, 205, 210, 205, 200)]
    late = [{"fft": us, "abs": 30} for us in (420, 400, 410, 400, 420)]
    late[2]["abs"] = 10_030
    calls = early + [{"fft": 300, "abs": 30}] * 10 + late
    ops = _ops_of(calls, monkeypatch)
    # THEN each op's time in a window is its median call: the FFT grew, the cheap op not
    assert ops["fft"]["early_us"] == 205 and ops["fft"]["late_us"] == 410
    assert ops["abs"]["early_us"] == ops["abs"]["late_us"] == 30
    grown = max(ops.values(), key=lambda o: o["late_us"] - o["early_us"])
    assert grown["name"] == "fft" and grown["op"] == "Opfft"


def test_an_op_that_ran_in_some_calls_counts_zero_in_the_others(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # an op that ran in two of the early window's five calls and in four of the late's
    early = [{"a": 100, "cond": 50}] * 2 + [{"a": 100}] * 3
    late = [{"a": 100, "cond": 60}] * 4 + [{"a": 100}]
    ops = _ops_of(early + [{"a": 100}] * 10 + late, monkeypatch)
    assert ops["cond"]["early_us"] == 0 and ops["cond"]["late_us"] == 60
    assert ops["a"]["early_us"] == ops["a"]["late_us"] == 100
