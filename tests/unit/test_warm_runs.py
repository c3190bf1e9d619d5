"""Issue 62: `harness.check` (and so the pytest plugin) forks each run from a warm
interpreter that imported the agent and the step's module once
(harness/agent/forkserver.py, `process.run_warm`), instead of starting one per run.
What that must keep: each run is a process of its own (a leak's leftovers are never
the next run's, a module's state is as imported), a run that dies or hangs leaves the
server serving the next, a module that starts a thread at import runs in a fresh
interpreter (a fork would lose the thread), and a module edited between two checks is
imported again."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.api import check
from harness.runtimes import process
from harness.runtimes.local import AGENT_DIR

STEPS = '''
import os
import re
import threading
import time

OUT = os.environ["WARM_OUT"]
with open(os.path.join(OUT, "imports"), "a") as f:
    f.write("%d\\n" % os.getpid())
KEPT = []


def note(name):
    path = os.path.join(OUT, "%s-%d-%d" % (name, os.getpid(), os.getppid()))
    if not os.path.exists(path):
        open(path, "w").close()


def first():
    note("first")


def second():
    note("second")


def keeps():
    note("keeps")
    KEPT.append(bytes(1024))


def clean_module():
    note("clean")
    assert not KEPT, "a run before this one left %d items in KEPT" % len(KEPT)


def dies():
    os._exit(3)


def holds():
    # catastrophic backtracking: a C loop that holds the GIL, so the agent's own
    # call timeout (a thread) never runs: the host's deadline ends it
    note("holds")
    re.match(r"(a+)+$", "a" * 40 + "b")
'''


@pytest.fixture
def steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[object, Path]]:
    """A fresh module of steps (its own name: the server of an earlier test may hold
    another `warmsteps`) and the folder its runs note themselves in."""
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("WARM_OUT", str(out))
    name = f"warmsteps_{os.getpid()}_{abs(hash(str(tmp_path)))}"
    (tmp_path / f"{name}.py").write_text(STEPS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = __import__(name)
    yield module, out
    sys.modules.pop(name, None)


def _runs(out: Path, name: str) -> list[tuple[int, int]]:
    """(pid, parent pid) of each run of `name`."""
    return [(int(p.name.split("-")[1]), int(p.name.split("-")[2]))
            for p in out.glob(f"{name}-*")]


def _imports(out: Path) -> list[int]:
    return [int(x) for x in (out / "imports").read_text().split()]


def test_checks_in_a_row_fork_from_one_server_that_imported_the_module_once(
        steps: tuple[object, Path]) -> None:
    module, out = steps
    a = check(module.first, budget="300ms")     # type: ignore[attr-defined]
    b = check(module.second, budget="300ms")    # type: ignore[attr-defined]
    assert not a.bad and not b.bad, (a, b)
    firsts, seconds = _runs(out, "first"), _runs(out, "second")
    assert firsts and seconds
    parents = {ppid for _, ppid in firsts + seconds}
    assert len(parents) == 1 and os.getpid() not in parents      # one server, not us
    assert not {pid for pid, _ in firsts} & {pid for pid, _ in seconds}  # a fork each
    # imported here (the fixture) and once in the server: never in a run
    assert _imports(out) == [os.getpid(), *parents]


def test_a_leak_is_found_and_the_next_run_starts_from_the_module_as_imported(
        steps: tuple[object, Path]) -> None:
    module, out = steps
    leak = check(module.keeps, budget="1s")             # type: ignore[attr-defined]
    clean = check(module.clean_module, budget="500ms")  # type: ignore[attr-defined]
    assert leak.verdict == "leak", leak
    # KEPT as imported (else the step's assert fails: crash): the leak's run kept its
    # items to itself
    assert not clean.bad, clean
    (server,) = {ppid for _, ppid in _runs(out, "keeps")}
    assert {ppid for _, ppid in _runs(out, "clean")} == {server} != {os.getpid()}


def test_a_run_that_dies_or_is_killed_at_its_deadline_leaves_the_server_serving(
        steps: tuple[object, Path]) -> None:
    module, out = steps
    check(module.first, budget="300ms")                 # type: ignore[attr-defined]
    died = check(module.dies, budget="300ms")           # type: ignore[attr-defined]
    assert died.verdict == "crash", died
    held = check(module.holds, budget="300ms",          # type: ignore[attr-defined]
                 settings={"timeout": "3s", "warmup": 0})
    assert held.bad, held
    after = check(module.second, budget="300ms")        # type: ignore[attr-defined]
    assert not after.bad, after
    (server,) = {ppid for _, ppid in _runs(out, "first")}
    assert server != os.getpid()
    assert {ppid for _, ppid in _runs(out, "second")} == {server}
    assert {ppid for _, ppid in _runs(out, "holds")} == {server}


def test_a_module_that_starts_a_thread_runs_in_a_fresh_interpreter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"threaded_{os.getpid()}_{abs(hash(str(tmp_path)))}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent('''
        import threading
        import time

        WORKER = threading.Thread(target=time.sleep, args=(3600,), daemon=True)
        WORKER.start()


        def step():
            assert WORKER.is_alive(), "the module's thread is gone (a forked run)"
    '''), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = __import__(name)
    try:
        for _ in range(2):      # the refusal, then a server that preloads nothing
            got = check(module.step, budget="300ms")
            assert not got.bad, got     # a forked run: crash, the thread gone
    finally:
        sys.modules.pop(name, None)


def test_a_module_edited_between_two_checks_is_imported_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"edited_{os.getpid()}_{abs(hash(str(tmp_path)))}"
    path = tmp_path / f"{name}.py"
    path.write_text("def step():\n    pass\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = __import__(name)
    try:
        assert not check(module.step, budget="300ms").bad
        path.write_text("KEPT = []\n\n\ndef step():\n    KEPT.append(bytes(1024))\n",
                        encoding="utf-8")
        assert check(module.step, budget="1s").verdict == "leak"
    finally:
        sys.modules.pop(name, None)


HANGS = '''
import os
import time


def hangs():
    with open(os.path.join(os.environ["WARM_OUT"], "run"), "w") as f:
        f.write("%d %d" % (os.getpid(), os.getppid()))
    time.sleep(3600)
'''

HOST = '''
import sys
sys.path.insert(0, sys.argv[1])
import harness
import {name}
harness.check({name}.hangs, budget="300ms", settings={{"timeout": "10m", "warmup": 0}})
'''


def _gone(pid: int) -> bool:
    """Exited (a zombie left for init to reap counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="no /proc")
def test_a_server_whose_host_died_kills_its_run_and_exits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"hangs_{os.getpid()}_{abs(hash(str(tmp_path)))}"
    (tmp_path / f"{name}.py").write_text(HANGS, encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("WARM_OUT", str(out))
    host = subprocess.Popen([sys.executable, "-c", HOST.format(name=name), str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not (out / "run").exists() or not (out / "run").read_text():
            assert time.monotonic() < deadline and host.poll() is None, "no run started"
            time.sleep(0.05)
        run, server = map(int, (out / "run").read_text().split())
        assert server != host.pid
        host.kill()     # SIGKILL: no atexit, no clean-up of its servers
        host.wait()
        deadline = time.monotonic() + 10
        while not (_gone(run) and _gone(server)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(run), "the run outlived its host"
        assert _gone(server), "the fork server outlived its host"
    finally:
        host.kill()
        for pid in [int(x) for x in (out / "run").read_text().split()] if (
                out / "run").exists() else []:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def test_a_server_serving_a_run_is_never_closed_to_make_way_for_another(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN as many servers as may be, one of them serving a run (its lock held while
    # its run goes on)
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


def test_a_fork_has_the_environment_a_wrapper_named_as_python_gives(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A server is started with its runs' environment, through the interpreter as named:
    a wrapper (`#!/bin/sh` ... `X=1 exec python "$@"`) sets, changes or unsets variables
    on the way, and a fresh run would have them so. A fork takes them too; the variables
    that change from run to run are the run's."""
    server = process.forkserver(AGENT_DIR / "forkserver.py")
    started = {"KEPT": "1", "WRAPPED": "yes", "PATH": "/wrapper/bin:/bin",
               "PYTEST_CURRENT_TEST": "first"}
    monkeypatch.setattr(server, "STARTED_ENV", started)
    asked = {"KEPT": "1", "PATH": "/bin", "UNSET_BY_WRAPPER": "x",
             "PYTEST_CURRENT_TEST": "second"}
    assert server.wrapped(asked, ["PYTEST_CURRENT_TEST"]) == {
        "KEPT": "1", "WRAPPED": "yes", "PATH": "/wrapper/bin:/bin",
        "PYTEST_CURRENT_TEST": "second"}
