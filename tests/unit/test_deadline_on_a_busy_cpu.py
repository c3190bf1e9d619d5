"""Issue 78 item 1, end to end: `harness.check` run pinned to one CPU beside busy loops
pinned to it (each in its own session, so the scheduler shares the CPU between them
and the cell as it does between a CI runner's jobs): the cell gets a quarter of the
CPU at most, and its 2 s budget, which a live look ends at 1.6 s of its own time at the
soonest, takes 6.4 s of wall time at least, past the 3 s deadline that kills it. A
spinning step, which the host starved, is `ambiguous` (rule `timeout-busy`): its
shortened run decides nothing. A step that hangs beside the same loops is `timeout`:
its call ran on the agent's own clock, stuck, whatever the load."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

STEPS = """
import time
KEPT = []

def spin():
    sum(range(2000))

def hang():
    KEPT.append(1)
    if len(KEPT) > 300:
        time.sleep(3600)
    sum(range(2000))
"""
CHECK = """
import sys
import harness
import steps
checked = harness.check(getattr(steps, sys.argv[1]), budget="2s",
                        settings={"timeout": "3s", "repeats": 0})
print(checked.verdict, checked.rule, checked.reason, sep="|")
"""
LOOPS = 3   # the cell gets a quarter of the CPU at most: the host takes 3/4


@pytest.fixture
def busy_cpu() -> Iterator[None]:
    loops = [subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", "while True: pass"],
                              start_new_session=True) for _ in range(LOOPS)]
    try:
        yield
    finally:
        for p in loops:
            p.kill()
            p.wait()


@pytest.mark.slow     # two checks of a few seconds each, killed at their deadline
@pytest.mark.skipif(shutil.which("taskset") is None or not sys.platform.startswith("linux"),
                    reason="taskset pins the cell and the loops to one CPU")
def test_a_deadline_the_host_took_decides_nothing_and_a_hang_is_a_timeout(
        tmp_path: Path, busy_cpu: None) -> None:
    (tmp_path / "steps.py").write_text(textwrap.dedent(STEPS), encoding="utf-8")
    (tmp_path / "check.py").write_text(textwrap.dedent(CHECK), encoding="utf-8")

    def check(step: str) -> list[str]:
        done = subprocess.run(["taskset", "-c", "0", sys.executable, "check.py", step],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip().splitlines()[-1].split("|")

    verdict, rule, reason = check("spin")
    assert (verdict, rule) == ("ambiguous", "timeout-busy"), reason
    assert "the host took" in reason and "raise timeout:" in reason
    verdict, rule, reason = check("hang")
    assert (verdict, rule) == ("timeout", "timeout"), reason
    assert "did not return" in reason
