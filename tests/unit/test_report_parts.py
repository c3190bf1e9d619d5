"""Typed vs_baseline views read result.json dicts, old ones included."""

from __future__ import annotations

from harness.report.model import cell_numbers
from harness.report.parts import Change, VsBaseline


def test_an_old_result_without_direction_or_rounds_takes_the_pooled_direction() -> None:
    res = {"vs_baseline": {"baseline": "a", "steps": {"ratio": 1.5, "p_value": 0.001,
                                                      "direction": "slower"},
                           "peak_rss": {"ratio": 1.0, "direction": "~"}}}
    vs = VsBaseline.of(res)
    assert vs is not None
    assert vs.direction == "slower" and vs.confirmation is None and vs.cpu is None
    assert vs.peak_rss == Change(1.0, "~", None)
    assert cell_numbers(res) == "time 1.50x baseline"


def test_no_comparison_is_none_and_rounds_decide_the_direction() -> None:
    assert VsBaseline.of({}) is None and VsBaseline.of({"vs_baseline": None}) is None
    res = {"vs_baseline": {"baseline": "a", "direction": "~",
                           "steps": {"ratio": 1.5, "p_value": 0.001, "direction": "slower"},
                           "confirmation": {"ratio": 1.01, "reason": "no change",
                                            "decided_by": [1, 2]}}}
    vs = VsBaseline.of(res)
    assert vs is not None and vs.direction == "~"
    assert vs.confirmation is not None and vs.confirmation.decided_by == 2
    assert cell_numbers(res) == ""
