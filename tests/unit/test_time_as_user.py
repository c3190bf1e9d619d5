"""Issue 85 items 2 and 3: the time per call a sweep prints is the step's own, as the
user's interpreter runs it, and a busy host does not stretch it.

A cell runs under the quiet heap's settings (PYTHONMALLOC=malloc, glibc's thread cache
off) for its heap readings; a step that allocates small objects costs more there
(`sorted(range(2000, 0, -1))` makes 2,000 ints). The agent times the steps again in a
second agent started with the user's settings (--as-user), and that is the figure the
table, the reports and result.json's `summary.median_step_s` carry. The truth is
measured in the test: the same step under timeit, in a plain interpreter and in one
started with the quiet heap's settings.
"""

from __future__ import annotations

import html
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sweepkit
from fakeruntime import Behaviour

from harness.analysis.records import human_seconds
from harness.protocol.ingest import read_samples
from harness.report.html import step_plot, step_point
from harness.result.model import CellResult, cell_text
from harness.runtimes.local import LocalRuntime

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="glibc's tunables are Linux's")

SORT = '''
def setup(params):
    return None


def step(state):
    sorted(range(2000, 0, -1))
'''
QUIET = {"PYTHONMALLOC": "malloc", "GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"}


def timed(env: dict[str, str]) -> float:
    """Seconds per call of the step by timeit (the best of 5 repeats), under `env`."""
    plain = {k: v for k, v in os.environ.items() if k not in QUIET}
    out = subprocess.run(
        [sys.executable, "-c", "import timeit; print(min(timeit.repeat("
         "'sorted(range(2000, 0, -1))', number=300, repeat=5)) / 300)"],
        capture_output=True, text=True, env={**plain, **env}, check=True, timeout=120)
    return float(out.stdout)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> sweepkit.Swept:
    tmp_path = tmp_path_factory.mktemp("asuser")
    path = sweepkit.write_matrix(tmp_path, [{"name": "py", "python": sys.executable}],
                                 ["sort.py"], name="sort", gpus=None,
                                 defaults={"budget": "1s"}, files={"sort.py": SORT})
    return sweepkit.sweep_matrix(path, LocalRuntime(tmp_path / "cache"), out=tmp_path / "out")


@pytest.fixture(scope="module")
def swept(sweep: sweepkit.Swept) -> CellResult:
    (res,) = sweep.results.values()
    return res


def test_the_time_per_call_printed_is_the_users_allocators(swept: CellResult) -> None:
    # GIVEN the step's time by timeit, as a user would take it, and under the quiet heap
    user, quiet = timed({}), timed(QUIET)
    user = min(user, timed({}))     # the best of both sides of the quiet heap's timing
    s = swept.summary
    assert s.median_step_s is not None and s.run_step_s is not None
    # THEN the agent timed calls as the user's interpreter runs them, and the figure
    # printed is theirs: nearer the user's timeit than the quiet heap's, where the two
    # differ (they do by 1.5-3x on glibc)
    assert s.user_calls and s.user_calls > 100, s
    if quiet > 1.3 * user:
        # (nearer as times are: by their ratio. A busy neighbour core slows this VM's
        # CPU up to 1.6x for seconds: the sweep's 0.5 s of user calls read 46 us once
        # where timeit, at other moments, read 28.5 and 84.6 us)
        assert abs(math.log(s.median_step_s / user)) < abs(math.log(s.median_step_s / quiet)), (
            s.median_step_s, user, quiet)
        assert s.run_step_s > s.median_step_s, s
    # AND the table says that figure
    assert f"{human_seconds(s.median_step_s)}/call" in cell_text(swept), cell_text(swept)


def test_the_trend_and_the_step_plot_say_the_users_time_beside_the_runs(
        sweep: sweepkit.Swept, swept: CellResult) -> None:
    # GIVEN the cell's own figures: the user's time per call and the measured phase's,
    # under the quiet heap's settings (a sort: 1.5-3x the user's on glibc)
    s = swept.summary
    assert s.median_step_s is not None and s.run_step_s is not None
    if s.run_step_s < 1.3 * s.median_step_s:
        pytest.skip("this machine's allocators time the sort alike: nothing to tell apart")
    # THEN the trend's band (report.html's and history.html's row trends, history's
    # words) lies about the user's figure, not about the quiet heap's
    point = step_point(swept)
    assert point is not None and point.value == s.median_step_s
    assert point.hi < (s.median_step_s + s.run_step_s) / 2, (point, s)
    # AND the cell's step plot, which draws the measured phase's times, says its
    # headline's median is the quiet heap's, not the figure the tables print
    (samples,) = (sweep.root / "cells").glob("*/samples.jsonl")
    svg = html.unescape(str(step_plot(read_samples(samples), swept.steps)))
    assert "quiet-heap median" in svg, svg[-600:]


def test_a_busy_host_does_not_stretch_the_time_per_call_printed(tmp_path: Path) -> None:
    # GIVEN a 1 ms step whose calls waited 1.5 ms each for a CPU the host's other work
    # held (the agent's run-queue delay: 60 % of the 2.5 ms the wall clock read)
    run = sweepkit.swept(tmp_path, ["a"], Behaviour(step_s=2.5e-3, rq_share=0.6))
    (res,) = run.results.values()
    s = res.summary
    # THEN the figure printed is the step's own, the wall clock's kept beside it
    assert s.median_step_s == pytest.approx(1e-3, rel=0.05), s
    assert s.wall_step_s == pytest.approx(2.5e-3, rel=0.05), s
    assert f"{human_seconds(s.median_step_s)}/call" in cell_text(res), cell_text(res)
