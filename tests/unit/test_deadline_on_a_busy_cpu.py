"""Issue 78 item 1, end to end: `harness.check` run pinned to one CPU beside busy loops
pinned to it (each in its own session, so the scheduler shares the CPU between them
and the cell as it does between a CI runner's jobs): the cell gets a quarter of the
CPU at most, and its 2 s budget, which a live look ends at 1.6 s of its own time at the
soonest, takes 6.4 s of wall time at least, past the 3 s deadline that kills it. A
spinning step, which the host starved, is `ambiguous` (rule `timeout-busy`): its
shortened run decides nothing. A step that hangs beside the same loops is `timeout`:
its call ran on the agent's own clock, stuck, whatever the load (the two checks run at
once, beside the same loops). A leak's lines are
named beside six such loops: its where run's wall deadline is its budget at the pace
the host allowed the measured run, doubled where it still ended the run (before, 2 of
3 runs beside 6 loops said no line)."""

from __future__ import annotations

import contextlib
import re
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

def leak():
    KEPT.append(bytes(1024))

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
WHERE = """
import harness
import steps
for _ in range(3):
    checked = harness.check(steps.leak, budget="300ms")
    print(checked.verdict, checked.busy, *checked.where, sep="|")
"""
# the where run's cell gets a seventh of the CPU: the old deadline left 2 of 3 runs'
# lines out
WHERE_LOOPS = 6
LOOPS = 3   # the cell gets a quarter of the CPU at most: the host takes 3/4


@contextlib.contextmanager
def _loops(n: int) -> Iterator[None]:
    loops = [subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", "while True: pass"],
                              start_new_session=True) for _ in range(n)]
    try:
        yield
    finally:
        for p in loops:
            p.kill()
            p.wait()


@pytest.fixture
def busy_cpu() -> Iterator[None]:
    with _loops(LOOPS):
        yield


@pytest.mark.slow     # two checks of a few seconds each, killed at their deadline
@pytest.mark.skipif(shutil.which("taskset") is None or not sys.platform.startswith("linux"),
                    reason="taskset pins the cell and the loops to one CPU")
def test_a_deadline_the_host_took_decides_nothing_and_a_hang_is_a_timeout(
        tmp_path: Path, busy_cpu: None) -> None:
    (tmp_path / "steps.py").write_text(textwrap.dedent(STEPS), encoding="utf-8")
    (tmp_path / "check.py").write_text(textwrap.dedent(CHECK), encoding="utf-8")

    # both checks at once on the loops' CPU (each a fifth of it at most): the loops hold
    # that CPU for as long as the test runs
    checks = {step: subprocess.Popen(["taskset", "-c", "0", sys.executable, "check.py", step],
                                     cwd=tmp_path, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
              for step in ("spin", "hang")}

    def check(step: str) -> list[str]:
        out, err = checks[step].communicate(timeout=300)
        assert checks[step].returncode == 0, err[-2000:]
        return out.strip().splitlines()[-1].split("|")

    verdict, rule, reason = check("spin")
    assert (verdict, rule) == ("ambiguous", "timeout-busy"), reason
    assert "the host took" in reason and "raise timeout:" in reason
    verdict, rule, reason = check("hang")
    assert (verdict, rule) == ("timeout", "timeout"), reason
    assert "did not return" in reason


@pytest.mark.slow     # three checks of a 0.3 s budget, each a few seconds beside the loops
@pytest.mark.skipif(shutil.which("taskset") is None or not sys.platform.startswith("linux"),
                    reason="taskset pins the cell and the loops to one CPU")
def test_a_leaks_lines_are_named_on_a_busy_cpu(tmp_path: Path) -> None:
    (tmp_path / "steps.py").write_text(textwrap.dedent(STEPS), encoding="utf-8")
    (tmp_path / "where.py").write_text(textwrap.dedent(WHERE), encoding="utf-8")
    with _loops(WHERE_LOOPS):
        done = subprocess.run(["taskset", "-c", "0", sys.executable, "where.py"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    checks = [line.split("|") for line in done.stdout.strip().splitlines()[-3:]]
    assert [c[0] for c in checks] == ["leak"] * 3, done.stdout
    # AND each says the host took its time (issue 79: a marked test took ~10x its budget
    # on a busy host, and said nothing of it)
    assert all(re.fullmatch(r"host busy: 0\.\d s of its calls' own time took "
                            r"\d+\.\d s", c[1]) for c in checks), checks
    for c in checks:
        assert any(re.search(r"at steps\.py:\d+ leak \(KEPT\.append\(bytes\(1024\)\)\)", w)
                   for w in c[1:]), c
