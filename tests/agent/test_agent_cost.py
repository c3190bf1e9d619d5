"""What a cell's agent costs beyond its steps (issue 62): its header is read without a
process (`uname -p`, which Python's platform.platform() starts for the processor's name)
and without the socket module, the scenario's functions are checked without importing
inspect where their code objects answer, each saying what it said before; the host's
argument lists are read without argparse; the watchdog waits on its pipe, not in a sleep
then a read that fails, and still leaves; and its own modules are byte-compiled once."""

from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from loadfile import load_file
from test_agent import AGENT, AGENT_DIR, INTERPRETERS, OLDEST, STABLE, scenario

from harness import matrixfile
from harness.agent import agent as agent_module
from harness.runtimes.base import ImageInfo, RunRequest

# In the interpreter under test: the agent's header fields beside what platform and
# socket say.
SAME = """
import json, platform, socket, sys
sys.path.insert(0, sys.argv[1])
import agent
print(json.dumps([[agent.platform_name(), *agent.machine_and_host()],
                  [platform.platform(), platform.machine(), socket.gethostname()]]))
"""


@pytest.mark.parametrize("python", INTERPRETERS)
def test_the_header_says_what_platform_and_socket_say(python: str) -> None:
    out = subprocess.run([python, "-c", SAME, str(AGENT_DIR)], capture_output=True,
                         text=True, check=True).stdout
    ours, theirs = json.loads(out)
    assert ours == theirs


# Runs the agent in this interpreter under an audit hook that notes every process it
# starts (the watchdog is a fork, which starts no program), and the modules it imported.
AUDITED = """
import json, runpy, sys
before = set(sys.modules)
started = []
def hook(event, args):
    if event in ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn"):
        started.append([event, str(args[0])[:200]])
sys.addaudithook(hook)
out = sys.argv[1]
sys.argv = sys.argv[2:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit:
    pass
with open(out, "w") as f:
    json.dump({"started": started, "modules": sorted(set(sys.modules) - before)}, f)
"""


def test_a_cell_starts_no_program_and_imports_neither_socket_nor_inspect(
        tmp_path: Path) -> None:
    # GIVEN a plain scenario, run by the agent as a cell runs it
    script = scenario(tmp_path, STABLE)
    seen = tmp_path / "seen.json"
    samples = tmp_path / "samples.jsonl"
    proc = subprocess.run([sys.executable, "-c", AUDITED, str(seen), str(AGENT),
                           "--scenario", str(script), "--iterations", "20", "--warmup", "5",
                           "--out", str(samples), "--no-gpu", "--quiet", "--heap", "quiet"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in samples.read_text().splitlines()]
    assert records[-1]["status"] == "ok" and records[-1]["iterations"] == 20
    header = records[0]
    assert header["machine"] and header["hostname"] and header["platform"]
    # THEN it started no program, and the modules only a mistake needs stayed out
    found = json.loads(seen.read_text())
    assert found["started"] == []
    assert not {"socket", "inspect", "difflib", "subprocess", "shutil", "argparse"} & set(
        found["modules"])


def _argparse_reads(argv: list[str]) -> dict[str, Any] | None:
    """What argparse's parser of the agent's options makes of `argv` (None: it refuses)."""
    try:
        return vars(agent_module._parser().parse_args(argv))
    except SystemExit:
        return None


MATRIX = """\
name: args
runtime: local
defaults: {%s}
matrix:
  image: [python3]
  scenario: [steps.py]
"""


@pytest.mark.parametrize("settings, attribute, durable", [
    ("iterations: 100, warmup: 10", (), True),
    ("max_iterations: 5000, sample_every: 5", ("heap", "stack"), False),
    ("max_iterations: 5000, budget: 2s, heap: stock", (), True),
])
def test_the_hosts_argument_lists_are_read_without_argparse_as_argparse_reads_them(
        tmp_path: Path, settings: str, attribute: tuple[str, ...], durable: bool) -> None:
    (tmp_path / "steps.py").write_text("def setup(p):\n    return p\n\n\ndef step(s):\n"
                                       "    pass\n")
    (tmp_path / "m.yaml").write_text(MATRIX % settings)
    (cell,) = matrixfile.load(tmp_path / "m.yaml").cells
    request = RunRequest(cell, ImageInfo(ref="python3"), tmp_path, tmp_path / "stop",
                         attribute=attribute, durable=durable)
    argv = request.agent_args("agent.py", str(tmp_path / "steps.py"), "out", "stop")[1:]
    ours = agent_module.read_options(argv)
    assert ours is not None
    assert vars(ours) == _argparse_reads(argv)


SPELLINGS = [
    ["--scenario=s.py", "--iterations=7", "--heap=quiet", "--no-fsync"],
    ["--scenario", "s.py", "--params", '{"a": "b=c"}', "--out", "o", "--stop-growth", "0"],
    ["--scenario", "", "--attribute", "all", "--max-overhead", "0.5", "--no-heap"],
    ["--budget-max", "3", "--budget", "1e-3", "--scenario", "s", "--sample-interval", "2"],
]
LEFT_TO_ARGPARSE = [
    ["--scenario", "s", "--iter", "5"],             # an abbreviation argparse takes
    ["--scenario", "s", "--budget", "-1"],          # a negative number argparse takes
    ["--scenario", "s", "--warmup", "-3"],
    ["--scenario", "a", "--scenario", "b"],         # the last wins in argparse
    ["--iterations", "5"],                          # no --scenario: refused
    ["--scenario", "s", "--heap", "loud"],          # not a choice: refused
    ["--scenario", "s", "--iterations", "x"],       # not a number: refused
    ["--scenario", "s", "--quiet=yes"],             # a flag takes no value: refused
    ["--scenario", "s", "--out"],                   # no value: refused
    ["--scenario", "s", "--out", "--quiet"],        # an option for a value: refused
    ["--scenario", "s", "extra"],                   # no positionals: refused
    ["--scenario", "s", "-h"],                      # the help
]


@pytest.mark.parametrize("argv", SPELLINGS + LEFT_TO_ARGPARSE, ids=" ".join)
def test_any_list_reads_as_argparse_reads_it_or_goes_to_argparse(argv: list[str]) -> None:
    ours = agent_module.read_options(argv)
    if argv in LEFT_TO_ARGPARSE:
        assert ours is None
    else:
        assert ours is not None and vars(ours) == _argparse_reads(argv)


def test_what_argparse_refuses_the_agent_refuses_as_argparse_says(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        agent_module.parse_args(["--scenario", "s", "--heap", "loud"])
    assert exc.value.code == 2
    assert "argument --heap: invalid choice: 'loud'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        agent_module.parse_args(["--scenario", "s", "--sample-every", "0"])
    assert "--sample-every must be >= 1" in capsys.readouterr().err
    assert agent_module.parse_args(["--scenario", "s", "--iter", "5"]).iterations == 5


def _load_scenariofile() -> Any:
    return load_file(AGENT_DIR / "scenariofile.py", "agent_scenariofile_for_test")


def _wrapped(state: object, extra: object) -> None:
    pass


def _wraps() -> Callable[..., None]:
    def outer(state: object) -> None:
        pass
    outer.__wrapped__ = _wrapped   # type: ignore[attr-defined]
    return outer


SHAPES: dict[str, Any] = {
    "(state)": "def f(state): pass",
    "()": "def f(): pass",
    "(a, b)": "def f(a, b): pass",
    "(a, b=1)": "def f(a, b=1): pass",
    "(a=1, b=2)": "def f(a=1, b=2): pass",
    "(*args)": "def f(*args): pass",
    "(**kw)": "def f(**kw): pass",
    "(a, *, k)": "def f(a, *, k): pass",
    "(a, *, k=1)": "def f(a, *, k=1): pass",
    "(*a, k)": "def f(*a, k): pass",
    "(a, /)": "def f(a, /): pass",
    "(a, b, /)": "def f(a, b, /): pass",
    "(a, /, b=1, *c, d=2, **e)": "def f(a, /, b=1, *c, d=2, **e): pass",
    "lambda": "f = lambda s: None",
    "lambda of none": "f = lambda: None",
    "a wrapper of two": _wraps(),
    "a class": "class f:\n    def __init__(self, state): pass",
    "a bound method": "class C:\n    def m(self, state): pass\nf = C().m",
    "a partial": "import functools\nf = functools.partial(lambda a, b: None, 1)",
    "a builtin": "f = len",
}


def _function(shape: Any) -> Any:
    if callable(shape):
        return shape
    space: dict[str, Any] = {}
    exec(shape, space)
    return space["f"]


def _binds_one(fn: Any) -> bool:
    try:
        inspect.signature(fn).bind(None)
    except (TypeError, ValueError):
        return False
    return True


@pytest.mark.parametrize("shape", SHAPES)
def test_a_function_taken_as_callable_with_one_argument_is_one_inspect_would_take(
        shape: str) -> None:
    # takes_one answers True only where inspect's signature binds one argument; where
    # it says False, call_problem asks inspect as before
    fn = _function(SHAPES[shape])
    takes = _load_scenariofile().takes_one(fn)
    assert takes is False or _binds_one(fn)
    if type(fn).__name__ == "function" and not hasattr(fn, "__wrapped__"):
        assert takes == _binds_one(fn)


def _group(pgid: int) -> list[int]:
    """The pids of process group `pgid` (from /proc/<pid>/stat)."""
    found = []
    for name in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        if name.isdigit() and int(stat.rsplit(b")", 1)[1].split()[2]) == pgid:
            found.append(int(name))
    return found


@pytest.mark.parametrize("python", [OLDEST, INTERPRETERS[-1]])
def test_the_watchdog_waits_on_its_pipe_and_leaves_with_the_agent(python: str,
                                                                  tmp_path: Path) -> None:
    # GIVEN an agent in a process group of its own, with its watchdog beside it
    script = scenario(tmp_path, "import time\n\n\ndef setup(params):\n    return None\n\n\n"
                                "def step(state):\n    time.sleep(0.01)\n")
    samples = tmp_path / "s.jsonl"
    proc = subprocess.Popen([python, str(AGENT), "--scenario", str(script), "--iterations",
                             "100", "--warmup", "0", "--out", str(samples), "--no-gpu",
                             "--quiet"], cwd=tmp_path, start_new_session=True)
    deadline = time.monotonic() + 30
    while proc.poll() is None and time.monotonic() < deadline and '"measure"' not in (
            samples.read_text() if samples.exists() else ""):
        time.sleep(0.01)
    during = _group(proc.pid)    # in the measured phase: the agent and its watchdog
    # WHEN the run ends well
    assert proc.wait(timeout=60) == 0
    assert len(during) == 2 and proc.pid in during
    # THEN the watchdog, which was there, leaves too (the agent's end closed its pipe)
    deadline = time.monotonic() + 10
    while _group(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _group(proc.pid) == []


@pytest.mark.parametrize("python", [OLDEST, INTERPRETERS[-1]])
def test_the_agent_byte_compiles_its_own_modules_and_not_the_scenarios(
        python: str, tmp_path: Path) -> None:
    # GIVEN the agent's files with no byte code yet, and a scenario importing a helper,
    # run as a cell runs it: PYTHONDONTWRITEBYTECODE=1
    agent_dir = tmp_path / "agent"
    shutil.copytree(AGENT_DIR, agent_dir, ignore=shutil.ignore_patterns("__pycache__"))
    folder = tmp_path / "scenario"
    folder.mkdir()
    (folder / "helper.py").write_text("X = 1\n")
    script = scenario(folder, "import helper\n\n\ndef setup(params):\n    return helper.X\n"
                              "\n\ndef step(state):\n    pass\n")
    proc = subprocess.run([python, str(agent_dir / "agent.py"), "--scenario", str(script),
                           "--iterations", "5", "--warmup", "0", "--no-gpu", "--quiet",
                           "--out", str(tmp_path / "s.jsonl")], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert proc.returncode == 0, proc.stderr
    # THEN the agent's own modules are compiled for the next run; the scenario's folder
    # is left as it was
    compiled = {p.name.split(".")[0] for p in (agent_dir / "__pycache__").glob("*.pyc")}
    assert {"fields", "loop", "writer", "watchdog", "stepper"} <= compiled
    assert sorted(p.name for p in folder.iterdir()) == ["helper.py", "scenario.py"]
