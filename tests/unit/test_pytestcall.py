"""Issue 79 item 1, in one process: what `harness.pytestcall.Calls` gives each call of a
marked test (the child's side; tests/unit/test_pytest_plugin_suite.py runs it through
pytest). Each call's fixtures are as pytest's one call would find them."""

from __future__ import annotations

import logging
import os
import pickle
import warnings

import pytest

from harness.api.scenario import scenario_text
from harness.pytestcall import CAPLOG, CAPTURE, MONKEYPATCH, RECWARN, Calls, Made, changeable


class Thing:
    value = 1


def _started(calls: Calls) -> Calls:
    """As the child has it: unpickled, then started."""
    got = pickle.loads(pickle.dumps(calls))
    assert isinstance(got, Calls)
    return got.start()


def test_each_call_finds_its_fixtures_as_pytest_sets_them_up() -> None:
    handlers = list(logging.getLogger().handlers)
    calls = _started(Calls({"n": 3}, pickle.dumps({"items": []}), {
        "monkeypatch": Made(MONKEYPATCH), "caplog": Made(CAPLOG),
        "capsys": Made(CAPTURE, "SysCapture"), "recwarn": Made(RECWARN)}))
    try:
        for _ in range(3):
            kw = calls.kwargs
            assert kw["n"] == 3 and kw["items"] == []
            kw["items"].append(1)                               # type: ignore[attr-defined]
            mp = kw["monkeypatch"]
            assert isinstance(mp, pytest.MonkeyPatch) and Thing.value == 1
            mp.setattr(Thing, "value", 2)
            caplog = kw["caplog"]
            assert isinstance(caplog, pytest.LogCaptureFixture) and caplog.records == []
            caplog.set_level(logging.INFO, "pytestcall")
            logging.getLogger("pytestcall").info("mine")
            assert caplog.messages == ["mine"] and caplog.get_records("call")[0].msg == "mine"
            capsys = kw["capsys"]
            assert isinstance(capsys, pytest.CaptureFixture)
            print("out")
            recwarn = kw["recwarn"]
            assert isinstance(recwarn, pytest.WarningsRecorder)
            warnings.warn(UserWarning("w"), stacklevel=1)
            assert len(recwarn) == 1
            calls.next()
            assert Thing.value == 1
            assert logging.getLogger("pytestcall").level == logging.NOTSET
        assert calls.kwargs["capsys"].readouterr().out == ""    # type: ignore[attr-defined]
    finally:
        calls.close()
    assert logging.getLogger().handlers == handlers


def test_a_capfd_holds_only_its_own_calls_output(capfd: pytest.CaptureFixture[str]) -> None:
    calls = _started(Calls({}, b"", {"capfd": Made(CAPTURE, "FDCapture")}))
    try:
        for _ in range(3):
            cap = calls.kwargs["capfd"]
            assert isinstance(cap, pytest.CaptureFixture) and cap.readouterr().out == ""
            os.write(1, b"x\n")
            calls.next()
        calls.next()                    # a call that wrote nothing
    finally:
        calls.close()
    assert capfd.readouterr().out == ""


def test_what_a_call_can_change_is_copied_for_each() -> None:
    assert changeable([]) and changeable({}) and changeable((1, [])) and changeable(Thing())
    assert not any(changeable(v) for v in (1, "s", b"b", None, 1.5, (1, "a"), frozenset()))


def patches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Thing, "value", 2)


def test_the_scenario_resets_after_every_call_and_closes_at_teardown() -> None:
    text = scenario_text(patches, None, Calls({}, b"", {"monkeypatch": Made(MONKEYPATCH)}))
    assert "    try:\n        _step(**state.kwargs)\n    finally:\n        state.next()\n" \
        in text
    assert text.endswith("def teardown(state):\n    state.close()\n")
    plain = scenario_text(test_what_a_call_can_change_is_copied_for_each, None, {})
    assert "    _step(**state)\n" in plain and "teardown" not in plain
