"""Issue 79 item 5: the plugin's words, in one process (the warning's place is checked
through pytest in tests/unit/test_pytest_plugin_suite.py). In the plugin the words name
the marker's arguments, never the command line's; the budget a run says is the budget
set; no advice names a budget that is not larger than the one set; a decided verdict
does not end with why it was not run again."""

from __future__ import annotations

from harness.analysis.decision import CellVerdict, _with_live
from harness.analysis.memory import RUNS_NO_MORE
from harness.analysis.records import LiveRun
from harness.api import check
from harness.api.marked import as_marker, fix_for, marker_words
from harness.errors import HarnessError
from harness.stages.measure import AS_READ, budget_advice

CREEP = ("heap grows +12 B/call (CI +9..+15) without slowing, 7.0 KiB over 600 calls: "
         f"under its 16 KiB floor, a small leak or a cache still filling; a run of 9,600 "
         f"calls would tell {RUNS_NO_MORE}")


def test_the_words_name_the_markers_arguments_not_the_command_line() -> None:
    said = marker_words(CREEP, decided=False)
    assert "--iterations" not in said and "repeats are spent" not in said
    assert "a run of 9,600 calls would tell (it runs no more: raise the marker's budget= " \
        "or iterations=" in said


def test_a_decided_verdict_does_not_say_why_it_was_not_run_again() -> None:
    tail = f"; {AS_READ} would pass its bound (4x its 0.5 s budget, `overrun`)"
    leak = "heap grows +216 B/call (CI +216..+217), +19.91 MiB over 97,331 calls, never " \
        "levelling off: a cache would hold more than 19.9 MiB"
    assert marker_words(leak + tail, decided=True) == leak
    assert marker_words(leak + tail + "; saved as 'main'", decided=True) == \
        leak + "; saved as 'main'"
    # an undecided one keeps it: why it stayed undecided
    assert marker_words(leak + tail, decided=False) == leak + tail


def _live(budget: float) -> LiveRun:
    return LiveRun(verdict="ok", source="heap", iterations=2610, reason="", seconds=0.8,
                   budget=budget, calls_to_decision=2610, calls_run=2700)


def test_the_budget_said_is_the_budget_set() -> None:
    """A run again has twice the budget (`stages.measure._next`): its live look said
    "of its 1 s budget" on a test marked 0.5 s."""
    within = CellVerdict("ok", "memory stable")
    again = _with_live(within, _live(1.0), "memory stable", budget=0.5)
    assert "of its 1 s budget" not in again
    assert "decided live at call 2610 after 0.8 s of a run again of 1 s (2x its 0.5 s " \
        "budget), stopped at call 2700" in again
    first = _with_live(within, _live(0.5), "memory stable", budget=0.5)
    assert "decided live at call 2610 after 0.8 s of its 0.5 s budget, stopped" in first
    assert "of its 0.5 s budget" in _with_live(within, _live(0.5), "x", budget=None)


def _advised(text: str) -> float | None:
    head = "set budget >= "
    return float(text.split(head)[1].split("s")[0]) if head in text else None


def test_no_advice_names_a_budget_not_larger_than_the_one_set() -> None:
    for budget in (0.2, 0.5, 1.0, 5.0, 40.0):
        for pace in (1e-6, 1e-4, 1e-3, 0.01, 0.1, 1.0):
            for need in (300, 3000, 9600):
                said = budget_advice(need, pace, budget, busy=False)
                got = _advised(said)
                assert got is not None and got > budget, (budget, pace, need, said)
                busy = budget_advice(need, pace, budget, busy=True)
                assert _advised(busy) is None and "quieter machine" in busy, busy
    assert budget_advice(300, 0.1, 0.5, busy=False) == "set budget >= 30s (300 calls at " \
        "this pace)"


def test_the_fix_line_never_asks_for_a_budget_not_larger() -> None:
    mark = "harness_leaks"
    assert fix_for("... set budget >= 31s (300 calls at this pace)", "insufficient", 0.5,
                   mark) == '\n  fix: run longer, e.g. @pytest.mark.harness_leaks(budget="31s")'
    assert "budget=" not in fix_for("... the host was busy", "busy-host", 0.5, mark)
    assert fix_for("no advice", "one-run", 20.0, mark).endswith('(budget="40s")')
    assert fix_for("no advice", "one-run", 0.5, mark).endswith('(budget="10s")')


def nothing() -> None:
    pass


def test_a_markers_mistyped_argument_is_named_as_the_markers() -> None:
    """`harness_leaks(budgt="1s")` and `budget="abc"` were refused in harness.check's
    words ("harness.check: settings['budgt']"); the marker gave them."""
    for budget, settings, said in (
            ("1s", {"budgt": "1s"}, "@pytest.mark.harness_leaks(budgt=...)"),
            ("abc", {}, "@pytest.mark.harness_leaks: budget='abc'")):
        try:
            check(nothing, budget=budget, settings=settings)
        except HarnessError as exc:
            words = as_marker(str(exc), "harness_leaks")
        else:
            raise AssertionError(f"{budget!r}, {settings!r} accepted")
        assert words.startswith(said) and "harness.check" not in words, words
        assert "fix:" in words, words
