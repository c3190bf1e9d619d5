"""Issue 78 point 2, through `harness.check`: a step whose pool's workers keep 50 KB a
task, the caller flat. On a busy host the workers' memory, read on a 0.5 s timer, was
read 8 times and dropped: `check(budget="2s")` returned `ok`, or a one-run slowdown, and
no word of the workers. They are read on every step sample now: `leak`, carried by
them."""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import harness

POOL = """
import multiprocessing

KEPT = []
_pool = None


def keep(n):
    KEPT.append(bytearray(50000))
    return len(KEPT)


def step():
    global _pool
    if _pool is None:
        _pool = multiprocessing.get_context("fork").Pool(2)
    _pool.map(keep, range(2))
"""


@pytest.fixture
def importable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("poolsteps", None)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc's smaps_rollup")
def test_a_pools_workers_leak_is_found_in_a_short_check(importable: Path) -> None:
    (importable / "poolsteps.py").write_text(textwrap.dedent(POOL), encoding="utf-8")
    import poolsteps  # type: ignore[import-not-found]

    got = harness.check(poolsteps.step, budget="2s")
    # THEN the leak the workers hold (2 tasks of 50 KB a call) is the verdict, carried
    # by them, its rate near what they keep
    assert (got.verdict, got.bad) == ("leak", True), str(got)
    rate = re.search(r"workers grow \+([\d.]+) KiB/call", str(got))
    assert rate is not None and 80 <= float(rate.group(1)) <= 130, str(got)
    # AND where it is says the growth is in the workers, not advice that cannot help
    # (issue 87: "a longer budget makes more calls", when no budget could name a line)
    assert len(got.where) == 1 and "is in the worker processes the step drives" in \
        got.where[0] and "longer budget" not in got.where[0], got.where
