"""`harness sweep --explain` and `harness explain` end to end, with the real agent on the
local runtime: two "images" (this interpreter, the second with BAD=1) where the second
leaks memory allocated at a known line in one scenario and slows in a known function in
another. The first bad cell's where.json must name that line (bytes per call; the site is
where the kept memory was allocated) and that function, absent or flat in the good one.
"""

from __future__ import annotations

import dataclasses
import json
import re
import stat
import sys
import textwrap
from pathlib import Path

import pytest

from harness.answers.kept import Explanation
from harness.answers.search import pairs
from harness.cli import main
from harness.report import read_run

LEAKY = """
import os

BAD = os.environ.get("BAD") == "1"
KEPT = []


def setup(params):
    return {"n": 0}


def step(state):
    state["n"] += 1
    data = bytearray(4000)       # allocated here, kept below when BAD
    if BAD:
        KEPT.append(data)
"""
ALLOC_LINE = 13
SLOW = """
import os

BAD = os.environ.get("BAD") == "1"


def setup(params):
    return {"n": 0}


def step(state):
    state["n"] += 1
    fixed()
    growing(state["n"] if BAD else 1)


def fixed():
    return sum(i * i for i in range(5000))


def growing(n):
    total = 0
    for i in range(25 + 40 * n):
        total += i * i
    return total
"""


def interpreter(tmp: Path, name: str, bad: bool) -> Path:
    path = tmp / name
    path.write_text(f"#!/bin/sh\nBAD={1 if bad else 0} exec {sys.executable} \"$@\"\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture(scope="module")
def explained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("explain")
    (tmp / "leaky.py").write_text(textwrap.dedent(LEAKY).lstrip())
    (tmp / "slow.py").write_text(textwrap.dedent(SLOW).lstrip())
    assert (tmp / "leaky.py").read_text().splitlines()[ALLOC_LINE - 1].strip().startswith(
        "data = bytearray(4000)")
    good, bad = interpreter(tmp, "py-good", False), interpreter(tmp, "py-bad", True)
    matrix = tmp / "m.yaml"
    matrix.write_text(
        "name: explain-e2e\nruntime: local\n"
        "defaults: {iterations: 300, warmup: 10, sample_every: 10, timeout: 2m}\n"
        f"matrix:\n  image:\n    - {{name: good, python: {good}}}\n"
        f"    - {{name: bad, python: {bad}}}\n  scenario:\n    - leaky.py\n"
        "    - slow.py\n")
    # The slow pair's attributed runs last a time budget, the default 5 s at least (what
    # a real step is given: test_a_step_of_microseconds_is_attributed_to_its_function
    # runs one); a step of a millisecond names its function in a second's samples
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("harness.explain.DEFAULT_BUDGET_S", 1.0)
        code = main(["sweep", str(matrix), "--explain", "-q", "--out", str(tmp / "reports")])
    assert code == 1, "the bad image leaks: exit 1"
    [run] = list((tmp / "reports" / "explain-e2e").iterdir())
    return run


def where(run: Path, image: str, scenario: str = "leaky") -> Explanation:
    ex = Explanation.from_json(json.loads(
        (run / "cells" / f"{image}.cpu.{scenario}" / "where.json").read_text()))
    assert ex is not None
    return ex


@pytest.mark.slow(seconds=15)     # the module fixture `explained` sweeps: start it early
def test_the_bad_cells_leaking_line_is_named_per_call_and_absent_in_the_good_one(
        explained: Path) -> None:
    bad = where(explained, "bad")
    assert bad.role == "first bad" and bad.paired == "good.cpu.leaky"
    assert "heap" in bad.kinds
    [line] = [d for d in bad.diff if d.startswith("heap:")]
    assert f"leaky.py:{ALLOC_LINE} step (data = bytearray(4000)" in line, line
    assert line.endswith("in bad; 0 in good"), line
    rate = float(line.split(" KiB/call")[0].split("+")[1])
    assert 3.8 <= rate <= 4.2, line          # bytearray(4000) per call
    assert any("Python's allocator saw" in n for n in bad.notes)
    good = where(explained, "good")
    assert good.role == "last good" and good.summary == ("heap: no site grew over 300 calls",)


def test_the_reports_show_where(explained: Path) -> None:
    md = (explained / "report.md").read_text()
    assert "**Where** (bad.cpu.leaky, first bad" in md and f"leaky.py:{ALLOC_LINE}" in md
    # issue 63's new-user pass: the last good's "no site grew" came first (image order)
    assert md.index("**Where** (bad.cpu.leaky, first bad") < md.index(
        "**Where** (good.cpu.leaky, last good"), md
    html = (explained / "report.html").read_text()
    assert 'class="where"' in html and f"leaky.py:{ALLOC_LINE}" in html
    assert main(["report", str(explained), "--issue", "cpu.leaky"]) == 1
    issue = (explained / "issue-cpu.leaky.md").read_text()
    assert "## Where" in issue and f"leaky.py:{ALLOC_LINE}" in issue


def test_a_slowdown_is_explained_by_the_function_that_took_the_late_time(
        explained: Path) -> None:
    bad = where(explained, "bad", "slow")
    assert set(bad.kinds) >= {"stack"}, bad.kinds
    top = next(d for d in bad.diff if d.startswith("time:"))
    assert "slow.py:" in top and " growing " in top and top.endswith("in good"), bad.diff
    # How much of the late time is growing's follows from the scenario, not the machine:
    # a run makes at least 300 calls, so the late calls' loop in growing() is over 6,000
    # steps against fixed()'s 5,000 (its share was 52-90 %, lower when a busy machine let
    # fewer calls into the attributed run's second); in good it stays at 65 steps, about
    # 1 % of the work, but a stack sampler on a busy machine read 9 % there beside 84 %
    # in bad (a fresh-clone CI): bad's share is asked to be a third or more, and three
    # times good's.
    # (a bad cell whose run did not read its own rise, a regression against good alone,
    # says shares of each run's samples, not of its late ones: issue 87)
    share, good = (int(x) for x in re.findall(r"(\d+)% (?:of (?:late )?samples|in good)",
                                              top))
    assert share >= 33 and share >= 3 * good, top


def test_a_generator_expression_is_named_by_the_function_it_is_written_in(
        explained: Path) -> None:
    """Issue 51: `fixed()` sums a generator expression; its time was said to be in
    `fixed.<locals>.<genexpr>`, Python's name for it, not the function the user wrote."""
    lines = [*where(explained, "good", "slow").summary, *where(explained, "bad", "slow").summary]
    line = textwrap.dedent(SLOW).lstrip().splitlines().index("    return sum(i * i for i in "
                                                            "range(5000))") + 1
    said = [ln for ln in lines if "sum(i * i for i in range(5000))" in ln]
    assert said and all(f" slow.py:{line} fixed (return sum(" in ln for ln in said), lines
    assert not any("<genexpr>" in ln or "<locals>" in ln for ln in lines), lines


def test_explain_one_cell_again(explained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = read_run(explained)
    assert sorted(p.cell for p in pairs(run.results)) == ["bad.cpu.leaky", "bad.cpu.slow"]
    code = main(["explain", str(explained), "bad.cpu.leaky", "-q"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.startswith("bad.cpu.leaky: leak") and f"leaky.py:{ALLOC_LINE}" in out


def test_bad_input_is_named(explained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(explained), "bad.cpu.leakyy"]) == 2
    assert "did you mean 'bad.cpu.leaky'" in capsys.readouterr().err
    assert main(["explain", str(explained / "nope")]) == 2
    capsys.readouterr()
    # A name nothing is near: the cells are named there, not sent to another command
    assert main(["explain", str(explained), "zzz"]) == 2
    err = capsys.readouterr().err
    assert "bad.cpu.leaky" in err and "harness report" not in err, err


def test_attributed_runs_have_a_length_and_a_deadline_from_the_sweeps_run(
        tmp_path: Path) -> None:
    from harness import matrixfile
    from harness.explain import ATTRIBUTE_CAP, MEMORY_CALLS, attributed
    from harness.matrixfile.model import BUDGET_CAP, DEFAULT_BUDGET_S

    (tmp_path / "s.py").write_text("def setup(p):\n    return 0\n\n\ndef step(s):\n    pass\n")
    (tmp_path / "m.yaml").write_text(
        "name: m\nruntime: local\ndefaults: {max_iterations: 1000, timeout: 10m}\n"
        "matrix:\n  image: [{name: a, python: python3}]\n  scenario: [s.py]\n")
    [cell] = matrixfile.load(tmp_path / "m.yaml").cells
    mem = attributed(cell, ("heap", "device"), took_s=10.0)     # 10 ms a call in the sweep
    assert mem.settings.max_iterations is None and mem.settings.repeats == 0
    assert mem.settings.iterations == MEMORY_CALLS
    assert mem.settings.timeout == 150 * 0.01 * MEMORY_CALLS + 60  # tracemalloc's worst
    # Only its where record is read: one reading a phase, not one every 10 calls, each
    # traced by tracemalloc
    assert mem.settings.sample_every == MEMORY_CALLS != cell.settings.sample_every
    # Time is attributed over a budget (the default one at least), with the calls a
    # fixed run would make at least, its deadline the sweep's run and the budget's cap
    time_ = attributed(cell, ("stack", "ops"), took_s=10.0).settings
    assert time_.sample_every == cell.settings.sample_every     # its windows' readings
    assert (time_.run_budget, time_.budget_calls, time_.max_iterations, time_.repeats) == (
        DEFAULT_BUDGET_S, MEMORY_CALLS, BUDGET_CAP, 0)
    assert time_.timeout == (10.0 + (1 + ATTRIBUTE_CAP) * DEFAULT_BUDGET_S
                             + 10 * 0.01 * MEMORY_CALLS + 60)
    assert attributed(cell, ("stack",), took_s=None).settings.timeout == 600
    longer = dataclasses.replace(cell, scenario=dataclasses.replace(
        cell.scenario, settings=dataclasses.replace(cell.settings, budget=30.0)))
    assert attributed(longer, ("stack", "heap")).settings.run_budget == 30.0


CHEAP = """
import re

HEADER = 'text/html; charset="utf-8"; q=0.9; level=1; format=flowed'
OPTION = re.compile(r'\\s*;\\s*([^=;\\s]+)\\s*=\\s*("[^"]*"|[^;]*)')


def setup(params):
    return {}


def parse_options_header(value):
    key, _, rest = value.partition(";")
    return key.strip(), dict(OPTION.findall(";" + rest))


def step(state):
    parse_options_header(HEADER)
"""


def test_a_step_of_microseconds_is_attributed_to_its_function(tmp_path: Path) -> None:
    """Issue 63: a regression of an 18 µs step (a header parser's regex rewritten) was
    attributed over a fixed 300 calls, about 5 ms: the stack sampler, 200 a second, took
    a sample or two, and the code step said explain attributed nothing. The attributed
    run now lasts a time budget, as a sweep's does."""
    from harness import matrixfile
    from harness.analysis.kinds import kind
    from harness.analysis.where import parse_where
    from harness.explain import attributed
    from harness.protocol.ingest import read_samples
    from harness.runtimes.base import RunRequest
    from harness.runtimes.local import LocalRuntime

    (tmp_path / "cheap.py").write_text(textwrap.dedent(CHEAP).lstrip())
    (tmp_path / "m.yaml").write_text(
        "name: cheap\nruntime: local\nmatrix:\n"
        f"  image: [{{name: a, python: {sys.executable}}}]\n  scenario: [cheap.py]\n")
    [cell] = matrixfile.load(tmp_path / "m.yaml").cells       # the default budget
    kinds = kind("regression").attribute                     # stack, ops and heap
    runtime = LocalRuntime(tmp_path / "cache")
    info = runtime.prepare(cell.image, lambda _: None)
    out = tmp_path / "out"
    out.mkdir()
    ended = runtime.run(RunRequest(attributed(cell, kinds), info, out, out / "stop",
                                   attribute=kinds), lambda _: None)
    assert ended.exit_code == 0, (out / "agent.log").read_text()
    series = read_samples(out / "samples.jsonl")
    w = parse_where(series.where or {})
    late = {s.frames[0][2]: s.late for s in w.stack if s.late}
    # THEN the late window holds samples enough to name a site (300 calls under
    # tracemalloc gave two at most; a budget tens, fewer on a loaded machine, whose
    # sampler thread wakes less often), most of them in the parser
    assert w.stack_samples[1] >= 10, (w.stack_samples, w.calls)
    top = max(late, key=lambda f: late[f])
    assert top == "parse_options_header", late


def test_a_budgeted_cells_attributed_run_is_as_long_as_the_calls_it_made(
        tmp_path: Path) -> None:
    """Issue 63 item 10: a `budget: 5s` cell (calls capped at 1,000,000) of 554 calls in
    6.8 s was attributed with its deadline from the cap: 6.8 us a call, 60 s in all,
    and tracemalloc's run of 300 calls was killed at step 47 ("the run stopped at step
    47, before the end of the late window (225..300)"); a time-only run would have
    asked for 1,000,000 fixed calls."""
    from harness import matrixfile
    from harness.explain import (
        ATTRIBUTE_CAP,
        DEADLINE_FACTOR,
        MEMORY_CALLS,
        TRACEMALLOC_SLOWER,
        attributed,
    )

    (tmp_path / "s.py").write_text("def setup(p):\n    return 0\n\n\ndef step(s):\n    pass\n")
    (tmp_path / "m.yaml").write_text(
        "name: m\nruntime: local\ndefaults: {budget: 5s, timeout: 20m}\n"
        "matrix:\n  image: [{name: a, python: python3}]\n  scenario: [s.py]\n")
    [cell] = matrixfile.load(tmp_path / "m.yaml").cells
    made, took = 554, 6.8
    per_call = took / made
    mem = attributed(cell, ("heap",), took_s=took, made=made)
    assert mem.settings.iterations == MEMORY_CALLS and mem.settings.run_budget is None
    assert mem.settings.timeout == TRACEMALLOC_SLOWER * per_call * MEMORY_CALLS + 60
    # a time run is budgeted (issue 63 item 1b): its least calls and its deadline from
    # the calls made, not the cap
    time_ = attributed(cell, ("stack", "ops"), took_s=took, made=made).settings
    assert time_.budget_calls == MEMORY_CALLS
    assert time_.timeout == pytest.approx(
        took + (1 + ATTRIBUTE_CAP) * 5.0 + DEADLINE_FACTOR * per_call * MEMORY_CALLS + 60)
