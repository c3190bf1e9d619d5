"""A budgeted `harness.check` (and so a marked test) is killed, `timeout`, a wide margin
past its `overrun` bound rather than at the matrix's 20-minute default: a run that
hangs (a TensorFlow step forked without its thread pool) must not hang its host."""

from __future__ import annotations

from harness.api.run import OVERRUN, bounded
from harness.matrixfile.entries import parse_duration
from harness.runtimes.base import CALL_TIMEOUT_S


def test_a_budgeted_check_gets_a_deadline_past_its_overrun_bound() -> None:
    got = bounded({"overrun": OVERRUN}, 5.0)
    seconds = parse_duration(str(got["timeout"]))
    assert seconds == OVERRUN * 5.0 + 2 * CALL_TIMEOUT_S
    assert seconds is not None and OVERRUN * 5.0 + CALL_TIMEOUT_S < seconds < 1200


def test_a_timeout_set_or_no_budget_is_left_as_asked() -> None:
    assert bounded({"overrun": 4, "timeout": "3s"}, 5.0)["timeout"] == "3s"
    assert "timeout" not in bounded({"overrun": 4}, None)
    assert "timeout" not in bounded({}, 5.0)      # no overrun bound: the matrix's own
