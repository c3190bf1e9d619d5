"""Issue 35 item 3: the scenario's output is capped (agent.log): a scenario printing
100 KB per call leaves the cap and a note of what was dropped, not everything."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_agent import INTERPRETERS, OLDEST, run_agent, scenario

from harness.agent.output import CAP_BYTES

LOUD = ("import os\nimport sys\n\n\ndef setup(params):\n    return []\n\n\n"
        "def step(state):\n    print('x' * 50000)\n"
        "    os.write(2, b'y' * 50000 + b'\\n')   # as a library's C code writes\n")


@pytest.mark.parametrize("python", INTERPRETERS)
def test_a_loud_scenario_leaves_the_cap_and_a_note(tmp_path: Path, python: str) -> None:
    # GIVEN a scenario writing ~100 KB per call, 120 calls (~12 MB), through print and fd 2
    script = scenario(tmp_path, LOUD)
    # WHEN the agent runs it
    proc, records = run_agent(python, script, tmp_path, "--quiet", iterations=110,
                              warmup=10)   # --quiet: as the host runs it
    end = records[-1]
    assert end["status"] == "ok", end
    written = 120 * (50001 + 50001)
    # THEN what reached the log is the cap (and the notes), the rest is counted
    log = proc.stdout + proc.stderr     # agent.log holds both
    assert CAP_BYTES <= len(log) <= CAP_BYTES + 1000
    assert end["output_dropped"] == written - CAP_BYTES
    assert f"harness: {written - CAP_BYTES} bytes of the scenario's output dropped" in log
    assert "is capped at 4 MiB" in log


def test_a_quiet_scenario_keeps_all_its_output_in_order(tmp_path: Path) -> None:
    script = scenario(tmp_path, "import os\n\n\ndef setup(params):\n    print('set up')\n"
                                "    return []\n\n\ndef step(state):\n    pass\n\n\n"
                                "def teardown(state):\n    os.write(1, b'torn down\\n')\n")
    proc, records = run_agent(INTERPRETERS[0].values[0], script, tmp_path, "--quiet")
    assert "output_dropped" not in records[-1]
    assert proc.stdout.index("set up") < proc.stdout.index("torn down")


# A child the scenario leaves running holds the output pipes' write ends (fds 1 and 2),
# so they never reach EOF: the agent drains them and ends, it does not wait 5 s on each.
LEFT_RUNNING = """
import json
import multiprocessing
import os
import subprocess
import sys
import time


def shout(i):
    os.write(1, b'worker %d\\n' % i)
    return i


def setup(params):
    if params['child'] in ('sleep', 'yes'):     # yes: writes to fd 1 without end
        child = subprocess.Popen(['sleep', '60'] if params['child'] == 'sleep' else ['yes'])
        pids = [child.pid]
    else:       # a pool never closed: its workers are forked, they hold every fd
        child = multiprocessing.get_context('fork').Pool(2)
        child.map(shout, range(2))
        pids = [p.pid for p in child._pool]
    with open('pids.json', 'w') as f:
        json.dump(pids, f)
    return {'child': child}


def step(state):
    print('step output')


def teardown(state):
    print('torn down ' + 'z' * 200000)      # more than a pipe holds: drained at the end
    sys.stdout.flush()
    os.write(2, b'last words\\n')
    print('buffered at the end')            # flushed when the agent gives fd 1 back
    with open('teardown.time', 'w') as f:
        f.write(repr(time.time()))
"""


def _kill_children(tmp_path: Path) -> None:
    pids = tmp_path / "pids.json"
    for pid in json.loads(pids.read_text()) if pids.exists() else []:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _run_left_running(tmp_path: Path, python: str,
                      child: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """LEFT_RUNNING with `child` under the agent, its children killed after: the agent's
    process (ended 0, its last record ok) and the seconds from the teardown to its end."""
    script = scenario(tmp_path, LEFT_RUNNING)
    try:
        proc, records = run_agent(python, script, tmp_path, "--quiet", iterations=20,
                                  warmup=2, params={"child": child})
        ended = time.time()
    finally:
        _kill_children(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert records[-1]["status"] == "ok", records[-1]
    return proc, ended - float((tmp_path / "teardown.time").read_text())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork and sleep: Linux's")
@pytest.mark.parametrize("child", ["sleep", "pool"])
@pytest.mark.parametrize("python", [OLDEST, pytest.param(sys.executable, id="current")])
def test_a_child_left_running_holds_the_pipes_but_the_agent_ends_at_once(
        tmp_path: Path, python: str, child: str) -> None:
    # GIVEN a scenario that leaves a child process running (holding fds 1 and 2) and
    # writes output up to its teardown's last line; WHEN the agent runs it
    proc, took = _run_left_running(tmp_path, python, child)
    # THEN it ends within a few seconds of the teardown, not after the 5 s wait on each
    # pipe (10 s) for an EOF the child never sends. (Those 10 s are sleep, which load does
    # not shorten; the end itself is a fraction of a second of CPU, which a busy host
    # stretches: 8 s keeps both apart.)
    assert took < 8, took
    # AND everything written before the end is in the log, in order
    out = proc.stdout
    assert out.count("step output") == 22, out.count("step output")
    assert "torn down " + "z" * 200000 + "\n" in out
    assert out.index("torn down") < out.index("buffered at the end")
    assert "last words" in proc.stderr
    if child == "pool":
        assert "worker 0" in out and "worker 1" in out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="yes: Linux's")
def test_a_child_that_never_stops_writing_holds_the_end_up_to_the_wait_only(
        tmp_path: Path) -> None:
    # GIVEN a scenario that leaves `yes` running, writing to fd 1 without end
    proc, took = _run_left_running(tmp_path, sys.executable, "yes")
    # THEN the agent stops copying at the end's 5 s wait (not 5 s on each pipe), and the
    # log stays capped, the scenario's own last lines in it
    assert took < 8, took
    assert "last words" in proc.stderr
    assert len(proc.stdout) + len(proc.stderr) <= CAP_BYTES + 1000
