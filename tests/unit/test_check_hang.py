"""Issue 87 item 4: a hang under `harness.check` (and so the plugin) says where it waits,
as a sweep's does, and when it would end the run is said as the run starts. Before, a
first call that never returned was silent until the host killed the run at its deadline
(`call 1 (warm-up) did not return after 244 s`, no line named): the agent's call timeout
spared the first call (it may compile), and nothing else ended it before the host."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.api import check

HANGS = '''import threading

_LOCK = threading.Lock()


def step():
    with _LOCK:
        _LOCK.acquire()
'''


def test_a_first_call_that_hangs_says_where_it_waits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "hangs.py").write_text(HANGS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "hangs", raising=False)
    import hangs  # type: ignore[import-not-found]

    said: list[str] = []
    # (a 30 s deadline: the agent ends the call at 27 s, its timer's look every half
    # second; at 8 s a loaded CI's host killed the run first, 0.8 s later)
    got = check(hangs.step, budget="1s", settings={"timeout": "30s"}, progress=said.append)
    # THEN it ends `timeout` before the host's deadline, naming the line it waits at
    assert got.verdict == "timeout", got
    assert "waiting at hangs.py:8 in step" in got.reason, got.reason
    # AND the run's start said when a call that hangs would end it
    assert any("a call that does not return in 27 s ends the run, saying where it waits"
               in line for line in said), said
