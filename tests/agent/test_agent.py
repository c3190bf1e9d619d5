"""The in-container agent, run as a subprocess by every Python 3.6+ interpreter found here.

The agent must run on the image's own interpreter (NGC TF1 images ship Python 3.8,
older ones 3.6), so these tests run it with each of 3.6 ... 3.12 that pyenv has, plus
the interpreter running pytest. Missing interpreters are skipped, never faked.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tests.pythons import pythons

AGENT_DIR = Path(__file__).resolve().parents[2] / "harness" / "agent"
AGENT = AGENT_DIR / "agent.py"


def _interpreters() -> list[Any]:
    found: dict[str, Any] = {}
    me = f"{sys.version_info[0]}.{sys.version_info[1]}"
    found[me] = pytest.param(sys.executable, id=f"py{me}-current")
    for minor in range(6, 13):
        version = f"3.{minor}"
        if version == me:
            continue
        hits = pythons(minor)
        if hits:
            found[version] = pytest.param(hits[-1], id=f"py{version}")
        else:
            found[version] = pytest.param(
                f"/nonexistent/python{version}", id=f"py{version}",
                marks=pytest.mark.skip(reason=f"no Python {version} interpreter here"))
    return [found[k] for k in sorted(found, key=lambda v: tuple(map(int, v.split("."))))]


INTERPRETERS = _interpreters()
OLDEST = next((p for p in INTERPRETERS if not p.marks), INTERPRETERS[0])

STABLE = """
def setup(params):
    return {"n": 0, "payload": params.get("payload")}


def step(state):
    state["n"] += 1


def info(state):
    return {"steps": state["n"], "payload": state["payload"]}
"""


def scenario(tmp_path: Path, text: str, name: str = "scenario.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def run_agent(python: str, script: Path, tmp_path: Path, *extra: str, iterations: int = 40,
              warmup: int = 10, every: int = 10, params: dict[str, Any] | None = None,
              env: dict[str, str] | None = None,
              timeout: float = 60) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    out = tmp_path / "samples.jsonl"
    args = [python, str(AGENT), "--scenario", str(script), "--iterations", str(iterations),
            "--warmup", str(warmup), "--sample-every", str(every), "--out", str(out),
            "--no-gpu", "--params", json.dumps(params or {}), *extra]
    proc = subprocess.run(args, capture_output=True, text=True,
                          timeout=timeout, cwd=tmp_path, env={**os.environ, **(env or {})})
    records = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return proc, records


def times(sample: dict[str, Any]) -> list[float]:
    """A step sample's step times, seconds (its `dt_b64`, as the host reads it)."""
    from harness.protocol.ingest import _float64s

    got = _float64s(sample["dt_b64"])
    assert got is not None, sample["dt_b64"][:80]
    return got


def kinds(records: list[dict[str, Any]]) -> list[str]:
    return [r["type"] for r in records]


def step_samples(records: list[dict[str, Any]], phase: str | None = None) -> list[dict[str, Any]]:
    return [r for r in records if r["type"] == "sample" and r["src"] == "step"
            and (phase is None or r["phase"] == phase)]


# ---------------------------------------------------------------- behaviour
@pytest.mark.parametrize("python", INTERPRETERS)
def test_stable_scenario(python: str, tmp_path: Path) -> None:
    # GIVEN a scenario with setup/step/info
    script = scenario(tmp_path, STABLE)
    # WHEN the agent runs 40 measured + 10 warm-up steps, sampling every 10
    proc, records = run_agent(python, script, tmp_path, params={"payload": "x"})
    # THEN one header, step samples, one end, written to the file and echoed to stdout
    assert proc.returncode == 0, proc.stderr
    assert kinds(records)[0] == "header" and kinds(records)[-1] == "end"
    assert kinds(records).count("header") == 1 and kinds(records).count("end") == 1
    assert [json.loads(line) for line in proc.stdout.splitlines()] == records
    header, end = records[0], records[-1]
    assert header["schema"] == 1
    assert header["params"] == {"payload": "x"}
    assert header["python"].startswith(python_version(python))
    assert header["config"] == {"iterations": 40, "warmup": 10, "sample_every": 10,
                                "sample_interval": 0.5, "budget": 0.0, "budget_min": 0}
    assert isinstance(header["packages"], dict)
    steps = step_samples(records)
    assert [s["phase"] for s in steps] == ["setup", "warmup"] + ["measure"] * 4
    assert len(step_samples(records, "measure")) == 40 // 10
    assert [s["i"] for s in steps] == [0, 10, 20, 30, 40, 50]
    assert sum(len(times(s)) for s in steps) == 40 + 10
    assert all(0 <= x < 1 for s in steps for x in times(s))   # seconds
    assert all(s["rss"] > 0 for s in steps)
    assert end["status"] == "ok" and end["mode"] == "steps"
    assert (end["iterations"], end["warmup"], end["stopped_early"]) == (40, 10, False)
    assert end["info"] == {"steps": 50, "payload": "x"}
    assert set(end["phases"]) == {"import", "setup", "warmup", "measure"}


SPIKE = """
def setup(params):
    return {"n": 0}


def step(state):
    state["n"] += 1
    if state["n"] == 25:              # between two samples (every 10 calls): 64 MiB touched
        bytearray(64 << 20)           # and freed within the call
"""


@pytest.mark.parametrize("python", [OLDEST, pytest.param(sys.executable, id="current")])
def test_the_end_says_the_peak_rss_a_call_reached_between_samples(python: str,
                                                                 tmp_path: Path) -> None:
    # GIVEN a call that touches 64 MiB and frees it before the next sample
    proc, records = run_agent(python, scenario(tmp_path, SPIKE), tmp_path)
    assert proc.returncode == 0, proc.stderr
    sampled = sorted(r["rss"] for r in records if r["type"] == "sample")
    # THEN the end record's high-water mark holds it over what the samples mostly read
    # (the median: the step samples, every 10 calls, miss it; a timer sample may land in
    # the call on a busy machine, where the call lasts longer)
    typical = sampled[len(sampled) // 2]
    assert records[-1]["rss_hwm"] >= typical + (60 << 20), (records[-1]["rss_hwm"], sampled)


def python_version(python: str) -> str:
    out = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                         stdout=subprocess.PIPE, text=True, check=True)
    return out.stdout.strip()


def test_uneven_sampling(tmp_path: Path) -> None:
    # 25 steps every 10: samples at 10, 20 and the last step, none lost
    script = scenario(tmp_path, STABLE)
    _, records = run_agent(sys.executable, script, tmp_path, iterations=25, warmup=0)
    measure = step_samples(records, "measure")
    assert [s["i"] for s in measure] == [10, 20, 25]
    assert [len(times(s)) for s in measure] == [10, 10, 5]


@pytest.mark.parametrize("python", INTERPRETERS)
def test_step_raises(python: str, tmp_path: Path) -> None:
    script = scenario(tmp_path, """
        def setup(params):
            return [0]


        def step(state):
            state[0] += 1
            if state[0] == 15:
                raise ValueError("kaboom at step %d" % state[0])
        """)
    proc, records = run_agent(python, script, tmp_path)
    assert proc.returncode == 1
    end = records[-1]
    assert end["type"] == "end" and end["status"] == "error"
    assert end["error"]["type"] == "ValueError"
    assert end["error"]["message"] == "kaboom at step 15"
    assert "Traceback" in end["error"]["traceback"]
    assert "ValueError: kaboom at step 15" in end["error"]["traceback"]
    assert end["warmup"] == 10 and end["iterations"] == 0  # died in the measured phase


def test_setup_raises_and_teardown_error_is_kept(tmp_path: Path) -> None:
    script = scenario(tmp_path, """
        def setup(params):
            raise ImportError("no module named tensorflow")


        def step(state):
            pass
        """)
    proc, records = run_agent(sys.executable, script, tmp_path)
    assert proc.returncode == 1
    assert records[-1]["error"]["type"] == "ImportError"
    assert step_samples(records) == []


@pytest.mark.parametrize("python", INTERPRETERS)
def test_plain_script(python: str, tmp_path: Path) -> None:
    # GIVEN a file without setup/step, running ~0.3 s
    script = scenario(tmp_path, """
        import time
        data = []
        for _ in range(6):
            data.append(bytearray(100000))
            time.sleep(0.05)
        print("done", len(data))
        """)
    # (--quiet, as the runtimes run it: the echo of timer samples to stdout from another
    # thread may split the script's own print lines)
    proc, records = run_agent(python, script, tmp_path, "--sample-interval", "0.05", "--quiet")
    assert proc.returncode == 0, proc.stderr
    end = records[-1]
    assert end["status"] == "ok" and end["mode"] == "script"
    assert "script" in end["phases"]
    assert step_samples(records) == []
    timer = [r["phase"] for r in records if r["type"] == "sample" and r["src"] == "timer"]
    # Every sample from the script's start to its end is the script's; one the timer took
    # before it (the agent reading the file) or after it (the agent's teardown), seen on
    # a loaded CI host, keeps the agent's phase.
    assert "script" in timer, timer
    start, last = timer.index("script"), len(timer) - 1 - timer[::-1].index("script")
    assert set(timer[start:last + 1]) == {"script"} and "script" not in timer[:start], timer
    assert set(timer[last + 1:]) <= {"teardown"}, timer
    assert proc.stdout == "done 6\n"


def test_nothing_is_written_after_the_end_record(tmp_path: Path) -> None:
    # GIVEN the agent's writer (a timer sample may race the end record)
    spec = importlib.util.spec_from_file_location("harness_agent_under_test", AGENT)
    assert spec is not None and spec.loader is not None
    agent: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(agent)
    out = tmp_path / "samples.jsonl"
    writer = agent.Writer(str(out), echo=False)
    # WHEN a sample arrives after the end
    writer.write({"type": "sample", "i": 1})
    writer.write({"type": "end", "status": "ok"})
    writer.write({"type": "sample", "i": 2})
    writer.close()
    writer.write({"type": "sample", "i": 3})
    # THEN the end record is the last line
    assert [json.loads(x)["type"] for x in out.read_text().splitlines()] == ["sample", "end"]


def test_plain_script_that_fails(tmp_path: Path) -> None:
    script = scenario(tmp_path, "raise SystemError('plain script broke')\n")
    proc, records = run_agent(sys.executable, script, tmp_path)
    assert proc.returncode == 1
    assert records[-1]["status"] == "error"
    assert "plain script broke" in records[-1]["error"]["traceback"]


@pytest.mark.parametrize(("code", "status", "rc"), [
    ("0", "ok", 0), ("None", "ok", 0), ("3", "error", 1), ("'bad input'", "error", 1)])
def test_plain_script_calling_sys_exit(tmp_path: Path, code: str, status: str, rc: int) -> None:
    # GIVEN the common `sys.exit(main())` ending of a script
    script = scenario(tmp_path, f"import sys\nprint('ran')\nsys.exit({code})\n")
    proc, records = run_agent(sys.executable, script, tmp_path)
    # THEN a non-zero exit is an error in the end record, not "ok"
    assert proc.returncode == rc
    end = records[-1]
    assert end["type"] == "end" and end["status"] == status
    if status == "error":
        assert end["error"]["type"] == "SystemExit"
        assert end["error"]["message"] == code.strip("'")


STOPS_AT_25 = """
import time


def setup(params):
    return {"n": 0, "control": params["control"], "sleep_s": params["sleep_s"]}


def step(state):
    state["n"] += 1
    if state["sleep_s"]:
        time.sleep(state["sleep_s"])
    if state["n"] == 25:
        open(state["control"], "w").close()
"""


def run_until_control(python: str, tmp_path: Path, every: int = 10,
                      sleep_s: float = 0) -> tuple[subprocess.CompletedProcess[str],
                                                   list[dict[str, Any]]]:
    """The agent on a scenario that creates the control file at its 25th step (sleeping
    sleep_s per step), for up to 1000 measured steps sampled every `every`."""
    control = tmp_path / "stop"
    script = scenario(tmp_path, STOPS_AT_25)
    return run_agent(python, script, tmp_path, "--control", str(control), iterations=1000,
                     warmup=0, every=every, params={"control": str(control), "sleep_s": sleep_s})


@pytest.mark.parametrize("python", INTERPRETERS)
def test_control_file_stops_early(python: str, tmp_path: Path) -> None:
    # GIVEN a scenario that creates the control file at its 25th step
    proc, records = run_until_control(python, tmp_path)
    # THEN the measured loop stops by the next sample point (sooner when the file's
    # 20 ms timer falls due first, as it does on a busy host), every step it ran sampled
    assert proc.returncode == 0, proc.stderr
    end = records[-1]
    assert end["status"] == "ok"
    assert end["stopped_early"] is True
    assert 25 <= end["iterations"] <= 30 < 1000
    measured = sum(len(times(s)) for s in step_samples(records, "measure"))
    assert measured == end["iterations"]


@pytest.mark.parametrize("python", INTERPRETERS)
def test_heap_grows_for_a_leak(python: str, tmp_path: Path) -> None:
    # GIVEN a scenario that keeps 10 KB per step, run with the system allocator
    script = scenario(tmp_path, """
        def setup(params):
            return []


        def step(state):
            state.append(bytearray(10000))
        """)
    proc, records = run_agent(python, script, tmp_path, iterations=200, warmup=0,
                              env={"PYTHONMALLOC": "malloc"})
    assert proc.returncode == 0, proc.stderr
    header = records[0]
    assert header["pythonmalloc"] == "malloc"
    assert header["heap"]["func"] in ("mallinfo2", "mallinfo")
    heap = [s["heap"] for s in step_samples(records, "measure")]
    assert len(heap) == 20 and all(isinstance(h, int) for h in heap)
    assert all(b > a for a, b in itertools.pairwise(heap))
    # 190 steps between the first and last measured sample, 10 KB each
    assert 0.9 * 190 * 10000 < heap[-1] - heap[0] < 1.5 * 190 * 10000


def test_no_heap_flag(tmp_path: Path) -> None:
    script = scenario(tmp_path, STABLE)
    _, records = run_agent(sys.executable, script, tmp_path, "--no-heap")
    assert records[0]["heap"] == {"func": None, "note": "disabled"}
    assert all("heap" not in s for s in step_samples(records))


@pytest.mark.parametrize("python", [OLDEST, pytest.param(sys.executable, id="current")])
def test_sigterm_during_a_long_step(python: str, tmp_path: Path) -> None:
    # GIVEN a step that hangs for a minute
    script = scenario(tmp_path, """
        import time


        def setup(params):
            return None


        def step(state):
            time.sleep(60)
        """)
    out = tmp_path / "samples.jsonl"
    proc = subprocess.Popen([python, str(AGENT), "--scenario", str(script), "--out", str(out),
                             "--iterations", "5", "--warmup", "0", "--no-gpu", "--quiet",
                             "--sample-interval", "0.05"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # WHEN SIGTERM arrives while the step sleeps (after the setup sample is written)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if out.exists() and '"phase":"setup"' in out.read_text():
                break
            time.sleep(0.02)
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        proc.stderr.close()
    # THEN the agent writes an end record with status error, and exits 1
    records = [json.loads(line) for line in out.read_text().splitlines()]
    end = records[-1]
    assert code == 1
    assert end["type"] == "end" and end["status"] == "error"
    assert end["error"]["type"] == "Terminated"
    assert f"signal {int(signal.SIGTERM)}" in end["error"]["message"]
    assert any(r.get("src") == "timer" for r in records)  # a hung step still yields samples


def test_bad_arguments_exit_2(tmp_path: Path) -> None:
    script = scenario(tmp_path, STABLE)
    proc = subprocess.run([sys.executable, str(AGENT), "--scenario", str(script),
                           "--sample-every", "0"], capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 2
    assert "--sample-every must be >= 1" in proc.stderr


# ---------------------------------------------------------------- source: 3.6, stdlib only
AGENT_FILES = sorted(AGENT_DIR.glob("*.py"))
DEBUG_FSTRING = re.compile(r"[^=!<>]=\s*(![rsa])?(:[^{}]*)?\}")


def test_agent_files_exist() -> None:
    assert AGENT in AGENT_FILES and len(AGENT_FILES) >= 2


@pytest.mark.parametrize("path", AGENT_FILES, ids=lambda p: p.name)
def test_agent_source_is_python36(path: Path) -> None:
    src = path.read_text(encoding="utf-8")
    # parses as 3.6 grammar (no walrus, positional-only params, ...)
    ast.parse(src, filename=str(path), feature_version=(3, 6))
    tree = ast.parse(src, filename=str(path))
    for node in ast.walk(tree):
        where = f"{path.name}:{getattr(node, 'lineno', '?')}"
        assert not isinstance(node, ast.NamedExpr), f"walrus at {where}"
        if isinstance(node, ast.JoinedStr):
            text = ast.get_source_segment(src, node) or ""
            assert not DEBUG_FSTRING.search(text), f"f-string with = (3.8+) at {where}"
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
            assert not (node.module == "__future__"
                        and any(a.name == "annotations" for a in node.names)), where
        else:
            names = []
        for name in names:
            top = name.split(".")[0]
            assert top != "dataclasses", f"dataclasses (3.7+) imported at {where}"
            assert top != "harness", f"the agent imports harness at {where}"
        if isinstance(node, ast.keyword):
            assert node.arg != "capture_output", f"capture_output (3.7+) at {where}"


def test_debug_fstring_detector_works() -> None:
    assert DEBUG_FSTRING.search('f"{x=}"')
    assert DEBUG_FSTRING.search('f"{x = !r:>10}"')
    assert not DEBUG_FSTRING.search('f"a={x}"')
    assert not DEBUG_FSTRING.search('f"{a == b}"')


@pytest.mark.skipif(OLDEST.values[0] == sys.executable or bool(OLDEST.marks),
                    reason="no older interpreter to compile with")
def test_agent_compiles_with_the_oldest_python() -> None:
    python = str(OLDEST.values[0])
    proc = subprocess.run([python, "-c", "import sys, ast\nfor p in sys.argv[1:]:\n"
                           "    ast.parse(open(p).read(), p)", *map(str, AGENT_FILES)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("python", [OLDEST])
def test_control_file_is_seen_between_sample_points(python: str, tmp_path: Path) -> None:
    # GIVEN 5 ms steps sampled every 100 steps, and the control file made at step 25
    proc, records = run_until_control(python, tmp_path, every=100, sleep_s=0.005)
    # THEN the timer check stops it within a few calls, not at step 100
    assert proc.returncode == 0, proc.stderr
    end = records[-1]
    assert end["stopped_early"] is True and 25 <= end["iterations"] <= 30


@pytest.mark.parametrize("python", [OLDEST, INTERPRETERS[-1]])
def test_step_samples_carry_contention_counters(python: str, tmp_path: Path) -> None:
    # GIVEN a step that sleeps: its run-queue delay is that of a thread that waits
    script = scenario(tmp_path, """
        import time


        def setup(params):
            return {}


        def step(state):
            time.sleep(0.001)
        """)
    proc, records = run_agent(python, script, tmp_path, iterations=40, warmup=0)
    assert proc.returncode == 0, proc.stderr
    measured = step_samples(records, "measure")
    assert measured and all(isinstance(s["rq_s"], float) and s["rq_s"] >= 0 for s in measured)
    assert all(isinstance(s["ivcs"], int) and s["ivcs"] >= 0 for s in measured)
    assert all(s["rq_all_s"] >= 0 and s["run_all_s"] >= 0 and s["ref_s"] > 0 for s in measured)
    # waiting is not queueing: an interval's run-queue delay fits in its wall time less
    # the 1 ms slept per step (a busy host queues the woken thread, never its sleep)
    steps = step_samples(records)
    for before, s in itertools.pairwise(steps):
        if s["phase"] == "measure":
            assert s["rq_s"] < s["t"] - before["t"] - 0.9 * 0.001 * len(times(s)), s
