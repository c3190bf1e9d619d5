"""Issue 78 point 1: a cell's `overrun` bound, and the pace "set budget >= X s" is
worked out from, count the cell's own seconds (the agent's `cell_s`), not the wall
clock a busy host stretched: what the host's other work and the agent's sampling took is
given back."""

from __future__ import annotations

from harness.protocol.series import Series
from harness.stages.measure import _given_back


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
