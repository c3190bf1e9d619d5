"""Issue 78 item 1: a live look reads how much of its budget a run has measured in the
cell's own time (the agent's `cell_s`), as the budget counts it. On a CPU that busy loops
took 80 % of, the wall clock made a live `ok` at "1.6 s of its 2 s budget" where the cell
had had 0.36 s of it: the evidence was cut to a fifth, and a deadline could not tell."""

from __future__ import annotations

from typing import Any

from harness.analysis.sequential import LiveDecider
from harness.protocol.ingest import Record
from harness.thresholds import AnalysisConfig

BUDGET = 2.0


def run(own_share: float, with_cell_s: bool = True) -> list[Any]:
    """A flat run of 1 ms steps measured for 2 s of wall time, `own_share` of it the
    cell's own; its live decisions."""
    decider = LiveDecider(AnalysisConfig(), 50, 10**7)
    decider.feed(Record("header", 1, {"type": "header", "schema": 1,
                                      "config": {"budget": BUDGET, "iterations": 10**7}}))
    stops = []
    for k in range(1, 201):
        wall = k * 0.01
        fields: dict[str, Any] = {
            "type": "sample", "src": "step", "phase": "measure", "i": 10 * k, "t": wall,
            "heap": 30_000_000, "uss": 60_000_000, "rss": 90_000_000,
            "dt": [0.001 / own_share] * 10}
        if with_cell_s:
            fields["cell_s"] = wall * own_share
        if (d := decider.feed(Record("sample", k + 1, fields))) is not None:
            stops.append(d)
    return stops


def test_a_run_the_host_starved_is_not_stopped_ok_on_the_wall_clock() -> None:
    # 2 s of wall time, 0.4 s of its own: a fifth of its budget, not the 0.8 a live ok needs
    assert run(0.2) == []


def test_a_run_that_had_its_time_is_stopped_ok_as_before() -> None:
    stops = run(1.0)
    assert [d.verdict for d in stops] == ["stable"]
    assert 0.8 * BUDGET <= stops[0].seconds <= BUDGET


def test_an_agent_that_does_not_say_its_cell_time_is_read_by_the_wall_clock() -> None:
    assert [d.verdict for d in run(0.2, with_cell_s=False)] == ["stable"]
