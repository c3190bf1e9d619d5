"""Issue 78 item 1: a wall-clock deadline (the matrix's `timeout:`, the plugin's and
`harness.check`'s) that kills a run while the host took most of its time decides
nothing: the cell is `ambiguous` (rule `timeout-busy`), neither `ok` nor `leak` nor
`timeout` from the shortened run. A run whose own time filled the deadline (a quiet
host), or a call stuck on the agent's own clock (a hang), is read as before."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.analysis.decision import within_run
from harness.analysis.outcomes import HOST_TOOK_SHARE, deadline_busy, host_stretched, host_took
from harness.protocol.ingest import Series, parse_lines
from harness.runtimes.base import RunOutcome
from harness.thresholds import AnalysisConfig

CFG = AnalysisConfig()
KILLED = RunOutcome(exit_code=None, timed_out=True, duration_s=12.0)


def killed(own_share: float, heap_leak: float = 0.0, stuck_s: float = 0.0,
           n: int = 400) -> Series:
    """A run killed before its end record: `n` calls of 1 ms of its own time each, its
    wall clock stretched so that its own time is `own_share` of it; `stuck_s`: the last
    call still running that long at the last (timer) sample."""
    recs: list[dict[str, Any]] = [{"type": "header", "schema": 1}]
    own = 0.0
    for k in range(10, n + 1, 10):
        own += 0.01
        recs.append({"type": "sample", "src": "step", "phase": "measure", "i": k,
                     "t": round(own / own_share, 6), "cell_s": round(own, 6),
                     "heap": 120e6 + heap_leak * k, "uss": 250e6 + heap_leak * k,
                     "rss": 300e6 + heap_leak * k, "dt": [0.001 / own_share] * 10})
    if stuck_s:
        t = own / own_share
        recs += [{"type": "sample", "src": "timer", "phase": "measure", "i": n,
                  "t": round(t + d, 6)} for d in (0.1, stuck_s / 2, stuck_s)]
    return parse_lines([(json.dumps(r) + "\n").encode() for r in recs])


def test_the_host_took_is_read_from_the_agents_cell_time() -> None:
    took = host_took(killed(0.25))
    assert took is not None
    wall, own = took
    assert own == pytest.approx(0.25 * wall, rel=0.02)


def test_a_checks_own_readings_are_not_the_host_stretching_it() -> None:
    """`python3 -m pytest examples/pytest/test_leaks.py` on a quiet host (one runnable
    thread) said "host busy: 3.2 s of its calls' own time took 7.2 s": the leak's run
    kept 537,000 dicts, and the readings' collections over them were counted with the
    host's delay. The readings are the run's own; only the rest is the host's."""
    from typing import cast

    from harness.api.checked import Checked
    from harness.result.model import CellResult

    unread = cast(CellResult, None)     # `busy` reads the times alone

    def end(measure: float, cell: float, sampling: float) -> Series:
        recs = [{"type": "header", "schema": 1},
                {"type": "end", "status": "ok", "iterations": 10,
                 "phases": {"measure": measure}, "cell_s": cell, "sampling_s": sampling}]
        return parse_lines([(json.dumps(r) + "\n").encode() for r in recs])

    quiet = host_stretched(end(7.2, 3.2, 3.9))
    assert quiet == pytest.approx((7.2, 7.1))
    assert Checked(unread, took=quiet).busy == ""
    busy = host_stretched(end(7.2, 1.0, 0.3))
    assert busy == pytest.approx((7.2, 1.3))
    assert Checked(unread, took=busy).busy.startswith(
        "host busy: 1.3 s of its calls' own time took 7.2 s")
    # a run killed before its end record: the step samples' time, as before
    assert host_stretched(killed(0.25)) == host_took(killed(0.25))


@pytest.mark.parametrize("heap_leak", [0.0, 65536.0])
def test_killed_while_the_host_took_most_of_it_decides_nothing(heap_leak: float) -> None:
    v = within_run(killed(0.2, heap_leak), KILLED, CFG, replicated=True)
    assert (v.verdict, v.rule) == ("ambiguous", "timeout-busy"), v.reason
    assert "busy host" in v.reason and "raise timeout:" in v.reason


def test_killed_with_its_own_time_filling_the_deadline_is_read_as_before() -> None:
    # own time over HOST_TOOK_SHARE of the wall: the deadline measured the scenario
    share = min(0.95, 1 - HOST_TOOK_SHARE + 0.2)
    assert within_run(killed(share), KILLED, CFG).verdict == "timeout"
    leaked = within_run(killed(share, 65536.0), KILLED, CFG)
    assert (leaked.verdict, leaked.rule) == ("leak", "timeout-leak")


def test_a_call_stuck_on_the_agents_own_clock_is_a_hang_whatever_the_load() -> None:
    series = killed(0.2, stuck_s=5.0)
    assert deadline_busy(series, KILLED) == ""
    assert within_run(series, KILLED, CFG).verdict == "timeout"


def test_a_run_that_ended_by_itself_is_never_crowded() -> None:
    assert deadline_busy(killed(0.2), RunOutcome(exit_code=0)) == ""
