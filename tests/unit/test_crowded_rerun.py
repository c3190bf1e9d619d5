"""Issue 87 item 5: a re-run is started only where it can finish. A run a busy host
starved until its deadline killed it (rule `timeout-busy`) ran again "with the same
1000000 iterations (the host was busy)" twice, each killed the same way (121 s, then
`ambiguous`). Now the same run again is planned at the killed run's own pace: the calls
its budget holds (never its cap), the wall seconds they take at that pace; where that
passes the timeout, the cell ends at once, saying so (rule `rerun-crowded-past`)."""

from __future__ import annotations

import types

from harness.analysis.rules import SAME, RerunEvidence, rerun_rule
from harness.matrixfile.model import RunSettings
from harness.protocol.series import Series
from harness.stages.measure import _same


def test_a_crowded_run_that_cannot_finish_by_its_deadline_is_not_run_again() -> None:
    ev = RerunEvidence(undecided=True, crowded=True, budgeted=True, timeout=40.0, left=300.0,
                       seconds=lambda kind: 121.0 if kind == SAME else 0.0)
    assert rerun_rule(ev)[0].id == "rerun-crowded-past"
    # one that fits its timeout at that pace runs again, the same length
    fits = RerunEvidence(undecided=True, crowded=True, budgeted=True, timeout=40.0,
                         left=300.0, seconds=lambda kind: 30.0)
    assert rerun_rule(fits)[0].id == "rerun-crowded"


def _killed(calls: int, wall_s: float, own_s: float, run_s: float) -> types.SimpleNamespace:
    """A run killed at its deadline: `calls` measured calls in `wall_s` of its measured
    phase, `own_s` of them its own (the agent's cell_s), `run_s` in all."""
    series = Series(end={"phases": {"measure": wall_s}, "cell_s": own_s},
                    samples=[{"src": "step", "phase": "measure", "i": calls,
                              "dt": [own_s / calls] * calls}])
    return types.SimpleNamespace(series=series, run_s=run_s)


def test_the_same_run_again_is_its_budgets_calls_at_the_killed_runs_pace() -> None:
    # GIVEN a 30 s budget killed at 40 s after 255 calls of 47 ms of their own, 149 ms on
    # the wall clock (a step allocating and dropping 100 MB a call, beside busy loops)
    run = _killed(255, 38.0, 12.0, 40.0)
    nxt = _same(run, RunSettings(budget=30.0, max_iterations=1_000_000))  # type: ignore[arg-type]
    # THEN it names the calls the budget holds at its own pace, not the cap
    assert "1,000,000" not in nxt.said and "about 637 calls" in nxt.said, nxt.said
    # AND they would take ~95 s at that wall-clock pace, past a 40 s timeout
    assert 90.0 < nxt.seconds < 100.0, nxt.seconds
    # a run of fixed calls: those calls
    fixed = _same(_killed(100, 10.0, 9.0, 11.0), RunSettings(iterations=300))  # type: ignore[arg-type]
    assert "the same 300 calls" in fixed.said and 30.0 < fixed.seconds < 32.0, fixed
