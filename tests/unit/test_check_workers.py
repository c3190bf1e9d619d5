"""Issue 78 point 2, through `harness.check`: a step whose pool's workers keep 50 KB a
task, the caller flat. On a busy host the workers' memory, read on a 0.5 s timer, was
read 8 times and dropped: `check(budget="2s")` returned `ok`, or a one-run slowdown, and
no word of the workers. They are read on every step sample now: `leak`, carried by
them. Issue 87 item 1: the line in the worker that keeps it is named, for a forked pool,
a spawned one and a ProcessPoolExecutor (it said "no line named ... attribution traces
the stepping process alone")."""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import harness
from harness.analysis.where import pool_loop

POOL = """
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

KEPT = []
_pool = None


def keep(n):
    KEPT.append(bytearray(50000))
    return len(KEPT)


def step():
    global _pool
    if _pool is None:
        context = multiprocessing.get_context(HOW.split("-")[0])
        _pool = (ProcessPoolExecutor(2, mp_context=context) if HOW.endswith("-executor")
                 else context.Pool(2))
    list(_pool.map(keep, range(2)))
"""


@pytest.fixture
def importable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("poolsteps", None)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc's smaps_rollup")
@pytest.mark.parametrize("how", ["fork", "spawn", "spawn-executor"])
def test_a_pools_workers_leak_is_found_in_a_short_check(importable: Path, how: str) -> None:
    (importable / "poolsteps.py").write_text(f"HOW = {how!r}\n" + textwrap.dedent(POOL),
                                             encoding="utf-8")
    import poolsteps  # type: ignore[import-not-found]

    got = harness.check(poolsteps.step, budget="2s")
    # THEN the leak the workers hold (2 tasks of 50 KB a call) is the verdict, carried
    # by them, its rate near what they keep
    assert (got.verdict, got.bad) == ("leak", True), str(got)
    rate = re.search(r"workers grow \+([\d.]+) KiB/call", str(got))
    assert rate is not None and 80 <= float(rate.group(1)) <= 130, str(got)
    # AND the line in the workers that keeps it is named, at about that rate, and no
    # line of the pool's own loop (issue 87 item 1)
    # (a CI at a load of ~8 named a second line once, not kept: what it was is shown now)
    named = [m for m in (re.match(r"workers: \+([\d.]+) KiB/call at poolsteps\.py:11 keep "
                                  r"\(KEPT\.append\(bytearray\(50000\)\)\)$", line)
                         for line in got.where) if m]
    assert len(named) == 1 and 80 <= float(named[0].group(1)) <= 130, got.where
    assert got.where[0] == named[0].group(0), got.where
    assert not any(pool_loop(line.split(" at ", 1)[-1]) for line in got.where), got.where
