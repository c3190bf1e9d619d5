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
3 runs beside 6 loops said no line).

The deadline checks' share is a CPU quota where this runs as root on cgroup v1 (CI's
machines): each check's group gets a fifth of one CPU in 10 ms periods and waits out the
rest in the run queue, as `/proc/self/schedstat` reads it, while the CPU it is not given
stays the suite's; the leak's lines likewise, a seventh of one CPU. Elsewhere busy loops
pinned beside the cell take it: the same share, burnt."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
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


CPU_GROUPS = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 10_000


@contextlib.contextmanager
def _quotas(share: int, cells: int) -> Iterator[list[list[str]] | None]:
    """`cells` cpu cgroups, each giving what it holds 1/`share` of one CPU; None where
    none can be made. Each prefix moves its command into its group before it starts."""
    groups = [CPU_GROUPS / f"harness-test-busy-{os.getpid()}-{share}-{i}"
              for i in range(cells)]
    try:
        for group in groups:
            group.mkdir()
            (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (group / "cpu.cfs_quota_us").write_text(str(PERIOD_US // share))
        made = True
    except OSError:
        made = False
    try:
        yield ([["sh", "-c", f'echo $$ > {g}/cgroup.procs && exec "$@"', "sh"]
                for g in groups] if made else None)
    finally:
        for group in groups:
            for _ in range(50):      # its processes are gone once their runs returned
                try:
                    group.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)


@contextlib.contextmanager
def _loops(n: int, cells: int = 1, quota: bool = True) -> Iterator[list[list[str]]]:
    """Command prefixes of `cells` cells that each get 1/(n+cells) of one CPU, as beside n
    busy loops on their CPU: a quota each where the host allows one (and `quota`), else
    the loops."""
    with (_quotas(n + cells, cells) if quota
          else contextlib.nullcontext(None)) as prefixes:
        if prefixes is not None:
            yield prefixes
            return
        loops = [subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c",
                                   "while True: pass"], start_new_session=True)
                 for _ in range(n)]
        try:
            yield [["taskset", "-c", "0"]] * cells
        finally:
            for p in loops:
                p.kill()
                p.wait()


@pytest.mark.slow     # two checks of a few seconds each, killed at their deadline
@pytest.mark.skipif(shutil.which("taskset") is None or not sys.platform.startswith("linux"),
                    reason="taskset pins the cell and the loops to one CPU")
def test_a_deadline_the_host_took_decides_nothing_and_a_hang_is_a_timeout(
        tmp_path: Path) -> None:
    (tmp_path / "steps.py").write_text(textwrap.dedent(STEPS), encoding="utf-8")
    (tmp_path / "check.py").write_text(textwrap.dedent(CHECK), encoding="utf-8")

    # both checks at once, each a fifth of one CPU at most, for as long as the test runs
    with _loops(LOOPS, cells=2) as prefixes:
        checks = {step: subprocess.Popen([*prefix, sys.executable, "check.py", step],
                                         cwd=tmp_path, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True)
                  for step, prefix in zip(("spin", "hang"), prefixes, strict=True)}
        outs = {step: p.communicate(timeout=300) for step, p in checks.items()}

    def check(step: str) -> list[str]:
        out, err = outs[step]
        assert checks[step].returncode == 0, err[-2000:]
        return out.strip().splitlines()[-1].split("|")

    verdict, rule, reason = check("spin")
    assert (verdict, rule) == ("ambiguous", "timeout-busy"), reason
    assert "the host took" in reason and "raise timeout:" in reason
    verdict, rule, reason = check("hang")
    assert (verdict, rule) == ("timeout", "timeout"), reason
    # the agent's own record names the call that did not return; where the host's kill
    # at the deadline came first (CI115, the suite's load beside the pinned loops), the
    # reason says that instead: either way a timeout, never `ambiguous`
    assert "did not return" in reason or "killed at its deadline" in reason, reason


@pytest.mark.slow     # three checks of a 0.3 s budget, each a few seconds beside the loops
@pytest.mark.skipif(shutil.which("taskset") is None or not sys.platform.startswith("linux"),
                    reason="taskset pins the cell and the loops to one CPU")
def test_a_leaks_lines_are_named_on_a_busy_cpu(tmp_path: Path) -> None:
    (tmp_path / "steps.py").write_text(textwrap.dedent(STEPS), encoding="utf-8")
    (tmp_path / "where.py").write_text(textwrap.dedent(WHERE), encoding="utf-8")
    # a 1/7 quota where one can be made: the busy line's own time is the readings' own
    # (their throttled waits are the host's), so it reads as beside loops
    with _loops(WHERE_LOOPS) as (prefix,):
        done = subprocess.run([*prefix, sys.executable, "where.py"],
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
