"""Issue 61 point 1: the agent reads the memory of the processes it started (`kids`, the
USS summed over every process below it: a multiprocessing pool's workers, a DataLoader's
with num_workers > 0), so a worker that keeps what each call sends it is seen; a run
without one carries no `kids`, and the processes the agent leaves out (its own helpers,
`Readers.exclude_pids`) are left out with everything below them."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from test_agent import AGENT_DIR, OLDEST, STABLE, run_agent, scenario

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="/proc and smaps_rollup are Linux's")

# A pool of one worker that keeps `bytes` (4 KiB) of every task in a global list.
POOL = """
import multiprocessing

KEPT = []


def keep(size):
    KEPT.append(bytearray(size))
    return len(KEPT)


def setup(params):
    pool = multiprocessing.get_context("fork").Pool(1)
    return {"pool": pool, "size": int(params.get("bytes", 4096))}


def step(state):
    state["pool"].apply(keep, (state["size"],))


def teardown(state):
    state["pool"].close()
    state["pool"].join()
"""
OLDEST_PATH = str(OLDEST.values[0]) if hasattr(OLDEST, "values") else str(OLDEST)


def measured_kids(records: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """(call, kids) of the measured phase's readings up to its last step sample (a
    timer sample after it may fall in teardown, which closes the pool)."""
    last = max(r["t"] for r in records if r["type"] == "sample" and r["src"] == "step"
               and r["phase"] == "measure")
    return [(r["i"], r["kids"]) for r in records if r["type"] == "sample"
            and r["phase"] == "measure" and r.get("kids") is not None and r["t"] <= last]


@pytest.mark.parametrize("python", [sys.executable, OLDEST_PATH])
def test_a_pool_worker_that_keeps_4_kib_a_task_grows_kids(python: str, tmp_path: Path) -> None:
    # GIVEN a scenario whose step sends its pool's worker a task that keeps 4 KiB
    script = scenario(tmp_path, POOL)
    # WHEN the agent runs 1,500 measured calls, its timer sampling every 20 ms
    proc, records = run_agent(python, script, tmp_path, "--sample-interval", "0.02",
                              iterations=1500, warmup=50, every=50)
    assert proc.returncode == 0, proc.stderr
    assert records[-1]["status"] == "ok", records[-1]
    # THEN the samples carry the workers' USS, growing about 4 KiB a call
    kids = measured_kids(records)
    assert len(kids) >= 3, kids
    (i0, k0), (i1, k1) = kids[0], kids[-1]
    assert i1 - i0 >= 500, kids
    per_call = (k1 - k0) / (i1 - i0)
    assert 3 * 1024 < per_call < 8 * 1024, (per_call, kids)


def test_a_run_without_workers_has_no_kids(tmp_path: Path) -> None:
    # GIVEN a scenario that starts no process (the agent's own helpers are left out)
    script = scenario(tmp_path, STABLE)
    proc, records = run_agent(sys.executable, script, tmp_path, "--sample-interval", "0.01",
                              iterations=400, warmup=10, every=10)
    assert proc.returncode == 0, proc.stderr
    # THEN no sample says anything of worker processes
    assert any(r["type"] == "sample" for r in records)
    assert [r for r in records if "kids" in r] == []


# Run by the oldest interpreter: the agent's readers module on its own, asked about a
# child that has a child of its own, before and after the child is left out.
EXCLUDED = """
import json, os, signal, subprocess, sys
sys.path.insert(0, sys.argv[1])
import readers

child = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                          "g = subprocess.Popen([sys.executable, '-c', 'import time; "
                          "time.sleep(60)']); print(g.pid, flush=True); time.sleep(60)"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
grandchild = int(child.stdout.readline())
try:
    r = readers.Readers()
    seen = r.descendants()
    kids = r.kids()
    r.exclude_pids.add(child.pid)
    left = r.descendants()
finally:
    os.kill(grandchild, signal.SIGKILL)
    child.kill()
    child.wait()
print(json.dumps({"child": child.pid, "grandchild": grandchild, "seen": seen,
                  "kids": kids, "left": left}))
"""


def test_the_excluded_processes_and_theirs_are_left_out(tmp_path: Path) -> None:
    script = tmp_path / "excluded.py"
    script.write_text(textwrap.dedent(EXCLUDED))
    out = subprocess.run([OLDEST_PATH, str(script), str(AGENT_DIR)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.splitlines()[-1])
    # THEN both processes below are found, and their USS read (a Python's is MiBs)
    assert {got["child"], got["grandchild"]} <= set(got["seen"]), got
    assert got["kids"] > 2**20, got
    # AND once the child is excluded, neither it nor its child is
    assert not {got["child"], got["grandchild"]} & set(got["left"]), got


def test_a_helper_started_excluded_is_never_read_as_a_worker(readers: Any) -> None:
    """A CI run of 3994462 under load: one cell's timer sample listed the agent's
    children between the as-user helper's fork and its exclusion, read it once as the
    scenario's workers, and the cell was left undecided ("the worker processes' memory
    read 1 times"). A helper started through `Readers.start_excluded` is left out from
    its first instant: a listing asked for between its fork and its exclusion waits.

    The listing is put in that gap by the test, not left to the scheduler: `start`
    forks the helper, starts a listing thread, waits until that thread is about to
    list, and gives it time to finish before `start` returns. (Racing a free-running
    lister against 30 starts listed twice in all on a busy CI runner.)"""
    import threading

    r = readers.Readers()
    # (what earlier tests in this process left running is not this test's to read)
    r.exclude_pids.update(r.descendants())
    seen: list[int | None] = []
    listers: list[threading.Thread] = []
    procs: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                                start_new_session=True)
        procs.append(proc)
        about_to_list = threading.Event()

        def listing() -> None:
            about_to_list.set()
            seen.append(r.kids())

        lister = threading.Thread(target=listing)
        listers.append(lister)
        lister.start()
        about_to_list.wait()
        lister.join(0.2)        # without the lock, the listing ends here and reads it
        return proc

    try:
        for _ in range(5):
            r.start_excluded(start)
        for lister in listers:
            lister.join()
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert len(seen) == 5
    assert seen == [None] * 5, f"listings between a helper's fork and exclusion: {seen}"
