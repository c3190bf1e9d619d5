"""Rule `short` (issue 49): a leak read where the run's time budget ended it after too
few calls to tell a leak from a cache of as many entries (slow steps: a few seconds hold
a few hundred) runs again until it has made `short_calls` calls; a leak that large on
its own, a run of that many calls, a run its cap ended, or a cell with no repeats left
stands as a leak, its words the size a cache would need."""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from harness.analysis.decision import CellFacts, cut_short, decide
from harness.analysis.rules import RULE_IDS
from harness.protocol.ingest import Series, parse_lines
from harness.thresholds import AnalysisConfig

CFG = AnalysisConfig()
NOISE = np.random.default_rng(49).normal(0, 512, 1000)


def run_of(calls: int, per_call: float, asked: int = 2000, spent: bool = True,
           budget: float | None = 5.0, pace: float = 0.017) -> Series:
    """A run of `calls` measured calls at `pace` s a call, the heap growing `per_call`
    bytes a call, read every 10 calls; `spent`: its time budget ended it."""
    at = np.arange(10, calls + 1, 10, dtype=np.float64)
    heap = 40e6 + per_call * at + NOISE[:at.size]
    config: dict[str, object] = {"iterations": asked, "warmup": 0, "sample_every": 10}
    if budget is not None:
        config["budget"] = budget
    recs: list[dict[str, object]] = [{"type": "header", "schema": 1, "config": config}]
    recs += [{"type": "sample", "src": "step", "phase": "measure", "i": int(c),
              "t": float(c) * pace, "heap": int(h), "dt": [pace] * 10}
             for c, h in zip(at, heap, strict=True)]
    end: dict[str, object] = {"type": "end", "status": "ok", "iterations": calls,
                              "warmup": 0, "phases": {"measure": calls * pace}}
    if spent:
        end["budget_spent"] = True
    recs.append(end)
    return parse_lines([(json.dumps(r) + "\n").encode() for r in recs])


def test_a_leak_its_budget_ended_after_few_calls_runs_again_until_it_could_tell() -> None:
    # GIVEN 300 calls of 17 ms in a 5 s budget, the heap growing 60 KiB a call throughout
    # (a cache of 300 compiled objects still filling looks just so)
    s = run_of(300, 60 * 1024)
    v = decide(CellFacts(CFG, s))
    # THEN it is no leak yet: the cell runs again until it has made `short_calls` calls
    assert v.verdict == "ambiguous" and v.rule == "short", v.reason
    assert "300 calls in its 5 s budget, 17 ms a call" in v.reason, v.reason
    assert v.rerun == CFG.short_calls == 2000
    # AND where it may not run again, it is a leak, said with the size a cache would need
    last = decide(CellFacts(CFG, s, again=False))
    assert last.verdict == "leak" and last.rule == "leak", last.reason
    assert "a cache would hold more than" in last.reason


def test_a_leak_that_matters_on_its_own_or_read_over_enough_calls_is_one() -> None:
    # GIVEN growth past `leak_large_bytes` in 300 calls (1 MiB a call)
    large = decide(CellFacts(CFG, run_of(300, 1024**2)))
    assert large.verdict == "leak" and large.rule == "leak", large.reason
    # AND 2,000 calls of that growth in the budget: as many calls as rule short asks
    enough = decide(CellFacts(CFG, run_of(2000, 60 * 1024, asked=10_000)))
    assert enough.verdict == "leak", enough.reason
    # AND a run whose cap (300) is under `short_calls`: the user's cap is kept
    capped = decide(CellFacts(CFG, run_of(300, 60 * 1024, asked=300)))
    assert capped.verdict == "leak", capped.reason


def cut(series: Series, least: int) -> tuple[str, int] | None:
    """Rule `length-short` on a run whose carrier leaks 1 MiB, `short_calls` `least`."""
    return cut_short(series, dataclasses.replace(CFG, short_calls=least), grown=2.0**20)


def test_a_run_is_cut_short_only_where_its_budget_ended_it_before_enough_calls() -> None:
    assert cut(run_of(300, 0.0), 2000) == ("300 calls in its 5 s budget, 17 ms a call", 2000)
    # the cap under `short_calls` is the calls the next run makes
    assert cut(run_of(300, 0.0, asked=800), 2000) == (
        "300 calls in its 5 s budget, 17 ms a call", 800)
    assert cut(run_of(300, 0.0, spent=False), 2000) is None    # its cap ended it
    assert cut(run_of(300, 0.0, budget=None), 2000) is None    # no budget said
    assert cut(run_of(2000, 0.0, asked=5000), 2000) is None    # enough calls
    assert cut(run_of(300, 0.0), 0) is None                    # the rule off
    # a leak past `leak_large_bytes`, none, or no repeats left: rule length-short is
    # not reached
    assert cut_short(run_of(300, 0.0), CFG, grown=CFG.leak_large_bytes) is None
    assert cut_short(run_of(300, 0.0), CFG, grown=None) is None
    assert cut_short(run_of(300, 0.0), CFG, again=False, grown=1.0) is None
    # AND a flat run cut short is ok, not held back: the rule reads only a leak
    flat = decide(CellFacts(CFG, run_of(300, 0.0)))
    assert flat.verdict == "ok", flat.reason
    assert "short" in RULE_IDS
