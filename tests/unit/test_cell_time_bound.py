"""Issue 78 point 1: a cell's `overrun` bound, and the pace "set budget >= X s" is
worked out from, count the cell's own seconds (the agent's `cell_s`), not the wall
clock a busy host stretched: what the host's other work and the agent's sampling took is
given back."""

from __future__ import annotations

import pytest

from harness.protocol.series import Series
from harness.stages.measure import _given_back, _own_s


def test_the_seconds_other_work_took_are_given_back() -> None:
    busy = Series(end={"phases": {"measure": 31.0}, "cell_s": 5.0})
    assert _given_back(busy) == 26.0


def test_an_agent_that_does_not_say_gives_nothing_back() -> None:
    assert _given_back(Series(end={"phases": {"measure": 5.0}})) == 0.0
    assert _given_back(Series(end=None)) == 0.0
    assert _given_back(None) == 0.0
    # a cell_s past the wall clock (it never is) gives nothing back, never takes
    assert _given_back(Series(end={"phases": {"measure": 5.0}, "cell_s": 6.0})) == 0.0


def test_a_whole_run_also_gives_back_what_the_host_took_of_its_start_and_end() -> None:
    # the agent's queued_out_s: its main thread's run-queue delay outside the measured
    # phase (interpreter start, import, setup, warmup, teardown), which a busy host
    # stretches as it does the measured phase
    busy = Series(end={"phases": {"measure": 31.0}, "cell_s": 5.0, "queued_out_s": 9.5})
    assert _given_back(busy) == 26.0                  # the measured phase's price: its own
    assert _given_back(busy, whole=True) == 35.5      # the run's, against the bound
    assert _given_back(Series(end={"queued_out_s": 2.0}), whole=True) == 2.0
    assert _given_back(Series(end={"queued_out_s": -1.0, "phases": {"measure": 1.0},
                                   "cell_s": 1.0}), whole=True) == 0.0


def test_a_run_counts_no_more_than_the_agents_own_life() -> None:
    # GIVEN a run whose host waited to spawn, read and reap the agent on a busy host
    # (a 0.5 s budget's run: 0.04 s outside the agent quiet, 2 s beside 14 busy loops)
    end = {"phases": {"measure": 0.6}, "cell_s": 0.55, "queued_out_s": 0.3, "own_s": 0.9}
    # THEN the bound counts the agent's own life, not the wall clock less its delay
    assert _own_s(3.0, Series(end=end)) == 0.9
    # AND never more than before: an own life past the wall less the delay is not taken
    assert _own_s(1.0, Series(end=end)) == pytest.approx(1.0 - 0.35)
    # AND an agent that does not say it (an older one) is read as before
    assert _own_s(3.0, Series(end={**end, "own_s": None})) == pytest.approx(3.0 - 0.35)
    assert _own_s(3.0, None) == 3.0
