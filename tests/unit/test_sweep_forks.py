"""A sweep's runs on the local runtime fork from a warm interpreter of their environment,
as `harness.check`'s do (tests/unit/test_warm_runs.py): a fresh interpreter's start cost
more CPU than a short run's or a round's steps. What that must keep: each run a process
of its own, and the environment a fresh interpreter would have had, including what a
wrapper named as the image's `python` sets before it execs the interpreter."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.runtimes import process
from harness.runtimes.local import AGENT_DIR

SCENARIO = '''
import os

OUT = os.environ["FORKS_OUT"]


def setup(params):
    name = "%s-%d-%d" % (os.environ.get("WRAPPED", "plain"), os.getpid(), os.getppid())
    open(os.path.join(OUT, name), "w").close()
    return {"n": 0}


def step(state):
    state["n"] += 1
'''


def test_a_sweeps_runs_are_forks_with_the_environment_a_wrapper_gives(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("FORKS_OUT", str(out))
    wrapper = tmp_path / "py-wrapped"
    wrapper.write_text(f"#!/bin/sh\nWRAPPED=wrapped exec {sys.executable} \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "a.py").write_text(SCENARIO, encoding="utf-8")
    (tmp_path / "b.py").write_text(SCENARIO, encoding="utf-8")
    matrix = tmp_path / "m.yaml"
    matrix.write_text(
        "name: forks\nruntime: local\n"
        "defaults: {iterations: 200, warmup: 10, sample_every: 10, timeout: 2m}\n"
        f"matrix:\n  image:\n    - {{name: plain, python: {sys.executable}}}\n"
        f"    - {{name: wrapped, python: {wrapper}}}\n"
        "  scenario:\n    - a.py\n    - b.py\n", encoding="utf-8")
    code = main(["sweep", str(matrix), "-q", "--out", str(tmp_path / "reports")])
    # (the verdicts of steps of a few ns are the host's: none is asked here)
    assert code in (0, 1, 4), code
    runs = [p.name.split("-") for p in out.iterdir()]
    by = {kind: [(int(pid), int(ppid)) for k, pid, ppid in runs if k == kind]
          for kind in ("plain", "wrapped")}
    # WHEN each image ran its two cells (and any rounds), THEN every run saw the
    # environment its interpreter's start gave: the wrapper's variable in its runs alone
    assert len(by["plain"]) >= 2 and len(by["wrapped"]) >= 2, runs
    assert len(by["plain"]) + len(by["wrapped"]) == len(runs), runs
    # AND each is a process of its own, forked by a server (not by the sweep's process),
    # one server serving both measured cells of an image
    pids = [pid for kind in by.values() for pid, _ in kind]
    assert len(set(pids)) == len(pids)
    parents = {ppid for kind in by.values() for _, ppid in kind}
    assert os.getpid() not in parents
    for kind in by.values():
        assert len({ppid for _, ppid in kind}) < len(kind), by


def test_a_server_serving_a_run_is_never_closed_to_make_way_for_another(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN as many servers as may be, one of them serving a run (its lock held, as a
    # sweep's lane holds it while its run goes on)
    monkeypatch.setattr(process, "_SERVERS", {})
    monkeypatch.setattr(process, "MAX_SERVERS", 1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    server = AGENT_DIR / "forkserver.py"
    _, busy = process._server(sys.executable, server, {**env, "WHICH": "a"})
    assert busy is not None
    try:
        with busy.lock:
            # WHEN another environment asks for one, THEN it gets none (it runs afresh)
            # and the busy one serves on
            assert process._server(sys.executable, server, {**env, "WHICH": "b"})[1] is None
            assert busy.alive()
        # AND once idle, it is the one that makes way
        _, other = process._server(sys.executable, server, {**env, "WHICH": "b"})
        assert other is not None and other is not busy
        busy.proc.wait(10)
        assert not busy.alive()
    finally:
        process.close_servers()
