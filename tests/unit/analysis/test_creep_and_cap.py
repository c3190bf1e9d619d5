"""Two ways a short run's memory was misread (issue 49, under the issue's own matrix,
`max_iterations: 2000`): steady growth under both leak floors read `ok` (a leak of
84 B/call, "no leak above 128 B/call in 2,000 calls"), and growth read at the cap with
most of the time budget left read `leak` (a cache the rest of the budget would show
levelling off). Both are `ambiguous` now, and the cell runs again long enough."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from harness.analysis.decision import CellFacts, decide
from harness.analysis.facts import CAP_MARGIN, Facts, capped_at
from harness.analysis.memory import memory_trend, trend_and_fill
from harness.analysis.rules import CREEP_MARGIN, Evidence, first_rule
from harness.protocol.ingest import Series, parse_lines
from harness.thresholds import AnalysisConfig

CFG = AnalysisConfig()
HEAP_CFG = dataclasses.replace(CFG, leak_floor_bytes=CFG.heap_floor_bytes)
CALLS = np.arange(10, 2001, 10, dtype=np.float64)    # 200 readings over 2,000 calls
NOISE = np.random.default_rng(84).normal(0, 256, CALLS.size)


def series_of(heap: np.ndarray, budget: float | None = None, took: float = 0.03,
              spent: bool = False, asked: int = 2000, pace: float = 1.5e-5) -> Series:
    """A run of 2,000 measured calls whose heap reads `heap`; with `budget`, the agent
    said its time budget, and its measured phase took `took` seconds."""
    config: dict[str, object] = {"iterations": asked, "warmup": 0, "sample_every": 10}
    if budget is not None:
        config["budget"] = budget
    recs: list[dict[str, object]] = [{"type": "header", "schema": 1, "config": config}]
    recs += [{"type": "sample", "src": "step", "phase": "measure", "i": int(c),
              "t": float(c) * pace, "heap": int(h), "dt": [pace] * 10}
             for c, h in zip(CALLS, heap, strict=True)]
    end: dict[str, object] = {"type": "end", "status": "ok", "iterations": 2000,
                              "warmup": 0, "phases": {"measure": took}}
    if spent:
        end["budget_spent"] = True
    recs.append(end)
    return parse_lines([(json.dumps(r) + "\n").encode() for r in recs])


def test_steady_growth_under_both_floors_is_neither_ok_nor_a_leak() -> None:
    # GIVEN the small leak: 84 B/call for 2,000 calls of a cheap step, 164 KiB,
    # under the heap's 256 KiB floor and the per-call rule's 128 B/call
    v = decide(CellFacts(CFG, series_of(30e6 + 84 * CALLS + NOISE)))
    heap = v.memory["heap"]
    # THEN it is undecided, said as what it is, and runs again long enough for that
    # rate's growth to pass twice the floor
    assert v.verdict == "ambiguous" and v.rule == "creep" and heap.creep, v.reason
    assert "+84 B/call" in v.reason and "under its 256 KiB floor" in v.reason, v.reason
    assert v.rerun == math.ceil(CREEP_MARGIN * heap.floor / heap.slope_lo)
    assert "no leak above" not in v.reason


@pytest.mark.parametrize(("what", "heap"), [
    ("flat", 30e6 + NOISE),
    ("8 B/call, under the 16 B/call floor", 30e6 + 8 * CALLS + NOISE / 8),
    ("a fill that slowed: 160 KiB over 600 calls, then flat",
     30e6 + 270 * np.minimum(CALLS, 600) + NOISE),
])
def test_what_does_not_creep_is_not_held_back(what: str, heap: np.ndarray) -> None:
    v = decide(CellFacts(CFG, series_of(heap)))
    assert v.verdict in ("ok", "plateau") and not v.memory["heap"].creep, (what, v.reason)


def test_a_creep_that_would_take_minutes_to_tell_is_not_held_back() -> None:
    # GIVEN the same 84 B/call, but on a step of 0.4 s: passing twice the heap's floor
    # would take ~6,500 calls, 43 minutes, where the run's whole budget was seconds
    v = decide(CellFacts(CFG, series_of(30e6 + 84 * CALLS + NOISE, pace=0.4)))
    # THEN it is read as before the creep rule, with the floor it reached
    assert v.verdict == "ok" and not v.memory["heap"].creep, v.reason
    assert "no leak above" in v.reason
    # AND at 1 ms a call (13 s) it runs again
    v = decide(CellFacts(CFG, series_of(30e6 + 84 * CALLS + NOISE, pace=1e-3)))
    assert v.rule == "creep", v.reason


def test_rss_never_creeps_and_a_floor_no_run_would_pass_turns_it_off() -> None:
    y = 30e6 + 84 * CALLS + NOISE
    # RSS is read by the total floor alone (pages move it), never per call
    assert not trend_and_fill("rss", CALLS, y, CFG, per_call=False)[0].creep
    # A floor a user set so high that no run of a million calls passes it at this rate:
    # growth under it does not matter to them
    high = dataclasses.replace(HEAP_CFG, leak_floor_bytes=1e12)
    t = memory_trend("heap", CALLS, y, high)
    assert t.kind == "stable" and not t.creep
    assert memory_trend("heap", CALLS, y, HEAP_CFG).creep


def test_a_run_cut_short_by_its_cap_is_said_with_what_its_budget_holds() -> None:
    flat = 30e6 + NOISE
    # GIVEN 2,000 calls, the cap, in 0.04 s of a 5 s budget
    said = capped_at(series_of(flat, budget=5.0, took=0.04))
    assert said is not None
    text, calls = said
    assert text == "2,000 calls, its cap, in 0.04 s of its 5 s budget"
    assert calls == math.ceil(CAP_MARGIN * 2000 * 5.0 / 0.04)
    # AND not where the budget ended it, it took over half of it, the agent did not say
    # its budget (an older series), or the live decider stopped it before the cap
    assert capped_at(series_of(flat, budget=5.0, took=5.0, spent=True)) is None
    assert capped_at(series_of(flat, budget=5.0, took=3.0)) is None
    assert capped_at(series_of(flat)) is None
    assert capped_at(series_of(flat, budget=5.0, took=0.04, asked=5000)) is None


def test_a_leak_read_at_the_cap_with_its_budget_left_runs_again_for_the_budget() -> None:
    # GIVEN growth of 1.2 KiB/call that never slows over 2,000 calls, the run's cap,
    # read in 0.04 s of a 5 s budget (a cache of 3,000 entries still filling looks so)
    s = series_of(30e6 + 1200 * CALLS + NOISE, budget=5.0, took=0.04)
    v = decide(CellFacts(CFG, s))
    # THEN it is no leak yet: the cell runs again, its cap raised to what the budget holds
    assert v.verdict == "ambiguous" and v.rule == "capped", v.reason
    assert "its cap, in 0.04 s of its 5 s budget" in v.reason
    assert v.rerun == math.ceil(CAP_MARGIN * 2000 * 5.0 / 0.04)
    # AND where the cell may not run again (its repeats spent), the growth is a leak
    last = decide(CellFacts(CFG, s, again=False))
    assert last.verdict == "leak" and last.rule == "leak", last.reason
    # AND where the budget, not the cap, ended the run, too
    spent = decide(CellFacts(CFG, series_of(30e6 + 1200 * CALLS + NOISE, budget=0.03,
                                            took=0.03, spent=True)))
    assert spent.verdict == "leak", spent.reason


def test_the_cap_rule_fires_only_on_a_leak() -> None:
    found = Facts(capped="2,000 calls, its cap, in 0.04 s of its 5 s budget",
                  budget_calls=375_000)
    heap = decide(CellFacts(CFG, series_of(30e6 + 1200 * CALLS + NOISE))).memory["heap"]
    assert first_rule(Evidence({"heap": heap}, found))[0].id == "capped"
    flat = decide(CellFacts(CFG, series_of(30e6 + NOISE))).memory["heap"]
    assert first_rule(Evidence({"heap": flat}, found))[0].id == "ok"
