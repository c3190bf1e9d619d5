"""Issue 61 point 6: on recorded full-budget runs (the live look off: the agent ran its
whole budget), the live look replayed gives the full run's verdict.

The runs are the repository's (tests/data/live-full/: benchmarks/late_onset.py's cases
and releases of the corpus, each run for its 5 s budget); `benchmarks/live_full.py`
replays them with the other recorded runs and prints the whole table.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

import pytest

from harness.analysis.sequential import LiveDecider
from harness.protocol.ingest import Record
from harness.thresholds import AnalysisConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from live_full import RECORDED, compared, read_run

RUNS = sorted(str(p.relative_to(RECORDED)) for p in RECORDED.glob("*/*.jsonl*"))
# A leak from 60 % of the budget (2 KiB a call from 3.65 s after setup; by hand +2,115
# B/call over the last third of a plain loop), which the look stopped `ok` at half
# the budget while the full run read `leak`.
LATE = "late-onset/late_leak_60pct.jsonl"
# pandas 2.1.2's items() at ~0.17 s a call: its 5 s budget goes on to its 300 calls,
# 50 s. A look at 0.8 of the budget's seconds stopped it `ok` at call 160, 19 s in; its
# full run read `ambiguous` (steps rising late, the host busy).
SLOW = "corpus/slow_pandas_items_dead_refs.pandas-2.1.2.jsonl.gz"


@pytest.mark.parametrize("run", RUNS)
def test_the_live_look_replayed_gives_the_full_runs_verdict(run: str) -> None:
    got = compared(run, read_run(RECORDED / run))
    assert got.agree, got


@pytest.mark.slow     # every recorded run replayed
def test_the_look_stops_some_of_them_early() -> None:
    # not a vacuous agreement: some runs are stopped, and that saves measured seconds
    stopped = [c for c in (compared(r, read_run(RECORDED / r)) for r in RUNS) if c.live]
    assert stopped and all(c.saved_s > 0 for c in stopped), stopped


def test_a_leak_that_starts_past_half_the_budget_is_not_stopped_ok() -> None:
    series = read_run(RECORDED / LATE)
    got = compared(LATE, series)
    assert got.full == "leak" and got.agree, got
    # the rule before (an `ok` from half the budget) stopped it flat
    before = compared(LATE, series, dataclasses.replace(AnalysisConfig(), live_ok_share=0.5))
    assert before.live == "ok" and not before.agree, before


def test_the_share_covers_every_start_a_full_run_reads_as_a_leak() -> None:
    # A full run's leak rules need its whole Theil-Sen slope (a median over pairs of
    # readings) above zero: growth moves it only where it started before 1/sqrt(2) of
    # the run. A look at share s reads its late third (`late_fraction`) flat too, which
    # growth moves where it started before s * (1 - (1 - 1/sqrt(2)) * late_fraction).
    cfg = AnalysisConfig()
    latest = 1 / math.sqrt(2)
    assert cfg.live_ok_share * (1 - (1 - latest) * cfg.late_fraction) >= latest


def test_a_slow_steps_run_is_measured_in_its_least_calls_too() -> None:
    series = read_run(RECORDED / SLOW)
    cfg = AnalysisConfig()
    decider = LiveDecider(cfg, 50, 1_000_000)
    assert series.header is not None
    decider.feed(Record("header", 0, series.header))
    # past its budget's seconds, but not past 0.8 of the calls it goes on to
    budget = decider.budget
    assert decider.share(4 * budget, 160) < cfg.live_ok_share
    assert decider.share(4 * budget, round(cfg.live_ok_share * decider.least)) >= \
        cfg.live_ok_share
    assert compared(SLOW, series, cfg).agree
