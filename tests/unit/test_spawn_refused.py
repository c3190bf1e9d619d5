"""A spawn the system refuses is a clear answer (126 and the reason), never a traceback.

A fresh-clone CI once died in `harness bisect` with `OSError: [Errno 14] Bad address` from
subprocess spawning `python3` for the local runtime's interpreter probe."""
from __future__ import annotations

import errno
import subprocess
import sys
from typing import Any

import pytest

from harness.runtimes import process


def _refusing(times: int, code: int) -> Any:
    real = subprocess.run
    calls = {"n": 0}

    def run(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] <= times:
            raise OSError(code, "Bad address" if code == errno.EFAULT else "refused")
        return real(*args, **kwargs)

    run.calls = calls  # type: ignore[attr-defined]
    return run


def test_a_spawn_refused_once_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    run = _refusing(1, errno.EFAULT)
    monkeypatch.setattr(process.subprocess, "run", run)
    rc, out = process.check_output([sys.executable, "-c", "print('ran')"], timeout=60)
    assert (rc, out.strip()) == (0, "ran")
    assert run.calls["n"] == 2


@pytest.mark.parametrize("code", [errno.EFAULT, errno.EACCES])
def test_a_spawn_refused_for_good_is_126_naming_the_program(monkeypatch: pytest.MonkeyPatch,
                                                             code: int) -> None:
    run = _refusing(99, code)
    monkeypatch.setattr(process.subprocess, "run", run)
    rc, out = process.check_output(["python3", "--version"], timeout=60)
    assert rc == 126
    assert out.startswith("could not start python3: ")
    assert f"[Errno {code}]" in out
    # transient kinds get one more try; a refusal such as EACCES does not
    assert run.calls["n"] == (2 if code == errno.EFAULT else 1)
