"""Issue 15 point 7: start-up. `harness --help` imports nothing heavy; a sweep imports
docker-py without paramiko (unless an ssh:// engine needs it) and no SciPy at all."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _modules_after(code: str, env: dict[str, str] | None = None) -> set[str]:
    code += "\nimport sys\nprint(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], env=env or ENV, capture_output=True,
                         text=True, check=True, cwd=ROOT)
    return set(out.stdout.split())


def test_help_imports_nothing_heavy_and_is_fast() -> None:
    mods = _modules_after("from harness.cli import main\n"
                          "try:\n    main(['--help'])\nexcept SystemExit:\n    pass")
    heavy = {"numpy", "scipy", "docker", "requests", "jinja2", "tabulate", "paramiko", "rich"}
    # What made --help slow was these imports; its time is measured side by side by
    # benchmarks/cell_overhead.py, never asserted here (a loaded machine takes seconds).
    assert not heavy & mods, heavy & mods


def test_verdicts_need_no_scipy() -> None:
    mods = _modules_after("import harness.analysis.decision, harness.stages.orchestrator, "
                          "harness.report")
    assert "scipy" not in mods


def test_docker_is_imported_without_paramiko_until_ssh_is_asked_for() -> None:
    mods = _modules_after(
        "from harness.runtimes import get_runtime\nget_runtime('docker')\n"
        "import docker.api.client\nassert not hasattr(docker.api.client, 'SSHHTTPAdapter')\n"
        "import sys\nassert 'paramiko' not in sys.modules")
    assert "docker" in mods and "paramiko" not in mods
    mods = _modules_after(
        "from harness.runtimes import get_runtime\nget_runtime('docker')\n"
        "from harness.runtimes.dockerengine import enable_ssh\nenable_ssh()\n"
        "import docker.api.client\nassert docker.api.client.SSHHTTPAdapter")
    assert "paramiko" in mods


def test_the_prefetch_thread_never_prints_a_traceback(capfd: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C during a slow import ends the interpreter under the prefetch thread (seen at
    load 14: 'Exception in thread prefetch' after exit 130); a failing import there is
    only a lost head start, said where the main thread imports it."""
    from harness.stages.orchestrator import prefetch_analysis

    prefetch_analysis("harness.no_such_module_for_this_test").join(timeout=60)
    assert "Traceback" not in capfd.readouterr().err


def test_a_sweep_reaches_its_first_container_without_numpy() -> None:
    """Issue 30 item 3: everything a sweep imports before its first container starts
    (the CLI, the orchestrator and its stages, the docker runtime) leaves NumPy and the
    reporters to the prefetch thread, which imports them while the container runs."""
    mods = _modules_after(
        "from harness.cli import build_parser\nbuild_parser('sweep')\n"
        "import harness.cli.sweep, harness.cli.sweeprun, harness.stages.orchestrator, "
        "harness.preflight, harness.report.live, harness.stages.settle\n"
        "from harness.runtimes import get_runtime\nget_runtime('docker')")
    assert not {"numpy", "jinja2", "tabulate"} & mods, {"numpy", "jinja2", "tabulate"} & mods


def test_a_report_is_rendered_without_numpy(tmp_path: Path) -> None:
    """`harness report DIR` re-renders every file, plots included, without NumPy (~0.15 s
    of its start): the plots read the samples as lists (`protocol.series.step_times`,
    `readings`), and `--issue`'s renderer, which compares step times with NumPy, loads
    only for `--issue`."""
    import sweepkit
    from fakeruntime import Behaviour

    run = sweepkit.swept(tmp_path, ["v1", "v2"], lambda c: Behaviour(leak_per_iter=16384)
                         if c.image.label == "v2" else Behaviour(), ["loop.py"]).root
    (run / "report.html").unlink(missing_ok=True)
    piped = {k: v for k, v in ENV.items() if k != "COLUMNS"}
    mods = _modules_after(f"from harness.cli import main\nassert main(['report', {str(run)!r}])"
                          " == 1", piped)
    page = (run / "report.html").read_text(encoding="utf-8")
    assert page.count("<svg") - page.count('class="trend"') == 2 * 4    # the cells' plots
    assert "numpy" not in mods and "harness.report.issue" not in mods
    # the table for a pipe is tabulate's, for a known width rich's: each loads only there
    assert "tabulate" in mods and "rich" not in mods
    mods = _modules_after(f"from harness.cli import main\nmain(['report', {str(run)!r}])",
                          {**piped, "COLUMNS": "120"})
    assert "rich" in mods and "tabulate" not in mods
    mods = _modules_after(f"from harness.cli import main\nmain(['report', {str(run)!r}, "
                          "'--issue', 'gpu0.loop', '-q'])")
    assert "harness.report.issue" in mods


def test_a_sweep_into_a_pipe_loads_no_live_display() -> None:
    """The sweep's progress into a pipe or a log is plain lines (`sweeping.course`): rich's
    live display (`report.live`) loads on a TTY alone."""
    mods = _modules_after("from harness.sweeping.course import PlainProgress, progress_for\n"
                          "assert isinstance(progress_for(False, str), PlainProgress)")
    assert "harness.sweeping.course" in mods
    assert "harness.report.live" not in mods and "rich" not in mods


def test_the_sweeps_help_loads_its_parser_alone() -> None:
    """`harness sweep --help` builds the sweep's parser and nothing a sweep runs: the
    results store, the result model and the reporters load past `cli.sweep.run`'s one
    boundary (`cli.sweeprun`); the matrix files' modules are the parser's (--between)."""
    mods = _modules_after("from harness.cli import main\n"
                          "try:\n    main(['sweep', '--help'])\nexcept SystemExit:\n    pass")
    ran = {m for m in mods if m.split(".")[:2] in (["harness", "store"], ["harness", "result"],
                                                   ["harness", "report"], ["harness", "app"])}
    assert "harness.cli.sweep" in mods and "harness.cli.sweeprun" not in mods
    assert ran <= {"harness.app", "harness.app.command"}, ran


def test_the_command_leaves_without_a_last_collection_over_its_objects() -> None:
    """Issue 30 item 3: the interpreter's final garbage collection over everything a
    sweep made took ~0.1 s of a one-cell sweep (0.3 s on a loaded host); `python -m
    harness` and the `harness` script freeze the heap before they exit instead."""
    code = ("import atexit, gc, runpy, sys\n"
            "atexit.register(lambda: print('frozen', gc.get_freeze_count()))\n"
            "sys.argv = ['harness', '--version']\n"
            "runpy.run_module('harness', run_name='__main__')\n")
    out = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True,
                         text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    said = out.stdout.split()
    assert said[-2] == "frozen" and int(said[-1]) > 0, out.stdout


def test_the_report_template_is_compiled_ahead_once_a_process() -> None:
    """Issue 30 item 3: report.html.j2 took ~70 ms to compile at the end of every sweep;
    the prefetch thread compiles it while the first container runs, and that one
    compiled template is what write_all renders with."""
    from harness.report.html import environment
    from harness.stages.orchestrator import prefetch_analysis
    from harness.sweeping.course import REPORTERS, compile_report_template

    prefetch_analysis(*REPORTERS, then=compile_report_template).join(timeout=120)
    env = environment()
    assert env is environment()
    assert env.cache is not None and any(name == "report.html.j2" for _, name in env.cache)


def test_a_command_builds_its_own_parser_alone() -> None:
    """Issue 30 item 3: `harness sweep ...` imports no other command's module (doctor's
    took ~50 ms of every sweep); the top-level help still lists every command."""
    mods = _modules_after("from harness.cli import main\n"
                          "try:\n    main(['sweep', '--help'])\nexcept SystemExit:\n    pass")
    assert "harness.cli.sweep" in mods
    assert not {"harness.cli.doctor", "harness.cli.bisect", "harness.cli.watch"} & mods
    out = subprocess.run([sys.executable, "-m", "harness", "--help"], env=ENV,
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0
    from harness.cli import COMMANDS

    assert all(name in out.stdout for name in COMMANDS)


def test_docker_is_imported_without_a_character_set_detector() -> None:
    """Issue 30 item 3: requests' charset_normalizer (~30-70 ms) is left out, and a
    body without a charset still reads, as UTF-8, with no warning said."""
    code = ("import warnings\nwarnings.simplefilter('error')\n"
            "from harness.runtimes import get_runtime\nget_runtime('docker')\n"
            "import requests\nr = requests.models.Response()\n"
            "r._content = 'zürich'.encode()\nassert r.text == 'zürich', r.text\n")
    mods = _modules_after(code)
    assert "docker" in mods and "requests" in mods
    assert not {"charset_normalizer", "chardet"} & mods


def test_the_top_level_help_lists_each_command_by_its_own_line() -> None:
    """Issue 64 item 4: `harness --help` imports no command's module (each imports what its
    run needs at its top); the line it shows for a command is the one the command's own
    parser gives."""
    import argparse

    from harness.cli import SUMMARIES, build_parser

    mods = _modules_after("from harness.cli import main\n"
                          "try:\n    main(['--help'])\nexcept SystemExit:\n    pass")
    assert not {m for m in mods if m.startswith("harness.cli.")}
    sub = next(a for a in build_parser()._actions
               if isinstance(a, argparse._SubParsersAction))
    assert {c.dest: c.help for c in sub._choices_actions} == SUMMARIES


def test_every_head_start_is_held_and_waited_for_before_the_command_exits() -> None:
    """`cli.finish` waits for the head starts a command made, by the references it holds
    (`app.command.hold`), not by a thread's name: every `prefetch_analysis()` of harness is
    handed to `headstart.hold`, and `wait` returns once each held thread has ended."""
    import ast
    import threading
    import time

    from harness.app import command as headstart  # its head starts' hold and wait

    loose = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        held = {id(node.args[0]) for node in ast.walk(tree) if isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "hold" and node.args}
        loose += [f"{path.relative_to(ROOT)}:{node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.Call)
                  and getattr(node.func, "id", None) == "prefetch_analysis"
                  and id(node) not in held]
    assert loose == []
    thread = headstart.hold(threading.Thread(target=time.sleep, args=(0.2,)))
    thread.start()
    headstart.wait()
    assert not thread.is_alive()


def test_a_check_imports_no_sweep_reports() -> None:
    """`harness.check` (a marked test's plugin, in every pytest process that runs one)
    imports none of a sweep's reports and progress; `harness.sweep` is loaded on first
    use."""
    mods = _modules_after("import harness\nharness.check\nfrom harness.api import marked")
    assert "harness.api.run" in mods and "harness.api.marked" in mods
    assert not {"rich", "harness.sweeping.course", "harness.api.matrix"} & mods
    mods = _modules_after("import harness\nassert callable(harness.sweep)")
    assert "harness.api.matrix" in mods
