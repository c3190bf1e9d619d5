"""How many calls a round's two runs make (`settle.within_reach`): the more of the two
sides' 0.1 s of steps, but no more than a side makes in ten times the longer measured run.
A cheap step's 0.1 s (issue 85) stands wherever the sides are within tenfold and their
steps flat; a step whose cost grows with the call (a leak each call walks) no longer
runs rounds far past what its measured run made."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from harness.analysis.decision import CellVerdict
from harness.analysis.records import StepTrend
from harness.analysis.rules import reach_s
from harness.protocol.series import Series
from harness.stages.settle import ROUND_MOST, ROUND_S, least_calls, within_reach


def series(steps: list[float]) -> Series:
    samples: list[dict[str, Any]] = [{"type": "sample", "src": "step", "phase": "measure",
                                      "i": len(steps), "dt": steps}]
    return Series(header={"type": "header", "schema": 1}, end=None, samples=samples)


def within(early: float, late: float, slowdown: bool) -> CellVerdict:
    trend = StepTrend(n=1, median_s=(early + late) / 2, early_median_s=early,
                      late_median_s=late, ratio=late / early, p_value=0.0 if slowdown else 0.5,
                      slowdown=slowdown)
    return cast(CellVerdict, SimpleNamespace(steps=trend))


def least(base: Series, suspect: Series) -> int:
    return max(least_calls(base.cols.own_step), least_calls(suspect.cols.median_step))


def test_a_cheap_steps_rounds_keep_their_tenth_of_a_second_within_tenfold() -> None:
    # GIVEN a 4 us step and its 2.3x (9.2 us), 300 calls each measured, the suspect's late
    # steps 1.3x its early ones by noise alone (no slowdown read)
    base, suspect = series([4e-6] * 300), series([9.2e-6] * 300)
    asked = least(base, suspect)
    assert asked == least_calls(4e-6)       # 0.1 s of the baseline's step
    # THEN the rounds make them all
    assert within_reach(asked, within(8e-6, 10.4e-6, False), base, suspect) == asked


def test_sides_further_apart_than_tenfold_make_what_ten_measured_runs_hold() -> None:
    # GIVEN a 1 us step and its 240x, 300 calls each measured
    base, suspect = series([1e-6] * 300), series([240e-6] * 300)
    asked = least(base, suspect)
    got = within_reach(asked, within(240e-6, 240e-6, False), base, suspect)
    # THEN the suspect's round runs ten times its measured run's seconds (0.1 s at least)
    limit = ROUND_MOST * max(ROUND_S, 300 * 240e-6)
    assert got < asked and got * 240e-6 <= limit < (got + 1) * 240e-6


def test_a_step_whose_cost_grows_runs_rounds_its_rise_allows() -> None:
    # GIVEN a baseline of 5.6 us and a suspect that slows with each call (a handler kept
    # per call, each call logging through all of them): 3,000 calls measured, rising
    # from 20 us to 250 us
    steps = [20e-6 + (250e-6 - 20e-6) * k / 2999 for k in range(3000)]
    base, suspect = series([5.6e-6] * 3000), series(steps)
    asked = least(base, suspect)
    trend = within(20e-6, 250e-6, True)
    took = sum(steps)
    # (at the baseline's 0.1 s of calls, each suspect round run would take some 18 s)
    assert reach_s(trend.steps, 3000, took, asked) > 30 * took
    got = within_reach(asked, trend, base, suspect)
    # THEN it makes the most calls whose run stays within ten measured runs
    assert reach_s(trend.steps, 3000, took, got) <= ROUND_MOST * took
    assert reach_s(trend.steps, 3000, took, got + 1) > ROUND_MOST * took
    assert 3000 < got < asked
