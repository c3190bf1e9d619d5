"""A process the scenario forks and ends with SIGTERM at once dies, as it would outside
the agent. The agent's SIGTERM handler was inherited by the child until its fork hooks
ran; a SIGTERM that came before them only marked the handler for Python to run, and
Python clears such marks in a new child: the signal was lost. A pool made and ended
each call (toolz's `test_fold`, `with Pool() as pool:`) hung in `Pool.terminate`'s join
on such a worker, idle on its queue, in 2 runs of 2 at a load of ~9.

The step here is that race made certain to be tried: it forks a child that waits on a
pipe, as an idle worker does, and sends it SIGTERM the moment fork returns, before the
child has run anything; the child must be gone within 5 s."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_agent import run_agent, scenario

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork")

FORKS = """
import os
import signal
import time


def setup(params):
    return None


def step(state):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.read(r, 1)       # waits, as an idle pool worker waits on its queue
        os._exit(0)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            os.close(r)
            os.close(w)
            assert os.WIFSIGNALED(status), status
            return
        time.sleep(0.005)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError("the child missed its SIGTERM")
"""


def test_a_child_sent_sigterm_as_it_forks_dies(tmp_path: Path) -> None:
    proc, records = run_agent(sys.executable, scenario(tmp_path, FORKS), tmp_path,
                              iterations=200, warmup=2, every=50, timeout=120)
    end = records[-1] if records else {}
    assert proc.returncode == 0 and end.get("status") == "ok", (end.get("error"), proc.stderr)
