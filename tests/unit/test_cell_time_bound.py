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
