"""Issue 35 item 3: every path ends honestly. A closed stdout or stderr stops a sweep
as an interruption (finished cells kept, `--resume` continues, exit 130, no traceback),
and every other command keeps its own exit code; a run directory with no finished cell
is never "the newest"."""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
SCENARIO = "def setup(params):\n    return []\n\n\ndef step(state):\n    state.append(1)\n"
README_CODES = {int(c) for c in re.findall(r"^\| (\d+) \|", (ROOT / "README.md").read_text(),
                                           re.M)}


def matrix(tmp: Path) -> Path:
    """Two cells of the same interpreter. `rounds: 0`: these tests are about how a path
    ends, not about step times; a step of 0.1 µs is far under the step floor, so no
    comparison can call it slower, and on a busy host the interleaved rounds that would
    confirm "no change" cost up to 12 runs a sweep (~20 s at load 10) for nothing."""
    (tmp / "s.py").write_text(SCENARIO)
    path = tmp / "m.yaml"
    path.write_text("name: pp\nruntime: local\n"
                    "defaults: {iterations: 60, warmup: 5, sample_every: 5, repeats: 0, "
                    "rounds: 0, timeout: 2m}\nmatrix:\n  image: [{name: a, python: python3}, "
                    "{name: b, python: python3}]\n  scenario: [s.py]\nbaseline: {image: a}\n")
    return path


def harness(*argv: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *map(str, argv)], cwd=cwd,
                          env=ENV, capture_output=True, text=True, check=False, timeout=300)


def in_process(*argv: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`harness ARGV` in `cwd` through the CLI's `main`, in this process: for a command
    whose exit code and words are checked, not how its process ends (those run as
    processes, `harness` and below); the same code, without a fresh interpreter's
    imports (~0.3 CPU-s a command). Its lines as wide as a process's here (ENV)."""
    from harness.cli import main

    out, err = io.StringIO(), io.StringIO()
    here = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                mock.patch.dict(os.environ, {"COLUMNS": ENV["COLUMNS"]}):
            code = main([*map(str, argv)])
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(["harness", *map(str, argv)], code, out.getvalue(),
                                       err.getvalue())


def pipe_to_head(argv: list[str], cwd: Path) -> int:
    """`harness ARGV 2>&1 | head -1`: the exit code of harness."""
    line = " ".join([sys.executable, "-m", "harness", *argv])
    out = subprocess.run(["bash", "-c", f"{line} 2>&1 | head -1 >/dev/null; "
                                        "echo ${PIPESTATUS[0]}"],
                         cwd=cwd, env=ENV, capture_output=True, text=True, check=True,
                         timeout=300)
    return int(out.stdout.split()[-1])


def cells_done(run: Path) -> set[str]:
    return {p.parent.name for p in run.glob("cells/*/result.json")}


@pytest.mark.slow     # a sweep, its reader gone, then resumed
def test_a_reader_that_leaves_stops_the_sweep_as_an_interruption(tmp_path: Path) -> None:
    # GIVEN a sweep whose stdout and stderr go to `head -1`
    m = matrix(tmp_path)
    # WHEN the reader leaves after the first line
    code = pipe_to_head(["sweep", "m.yaml", "--out", "r"], tmp_path)
    # THEN the sweep stops as Ctrl-C stops it: exit 130, never 1 ("a regression found")
    assert code == 130
    (debris,) = (tmp_path / "r" / "pp").iterdir()
    assert not cells_done(debris)
    # AND the directory it left (no finished cell) is never "the newest run"
    whole = in_process("sweep", m.name, "--out", "r", cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    (run,) = (p for p in (tmp_path / "r" / "pp").iterdir() if p != debris)
    (debris / "plan.json").write_text((debris / "plan.json").read_text().replace(
        '"started":', '"started": 9999999999, "was":'))   # recorded as started later
    report = in_process("report", "r/pp", cwd=tmp_path)
    assert report.returncode == 0, report.stdout + report.stderr   # the debris: exit 4
    history = in_process("history", "r/pp", cwd=tmp_path)
    assert history.returncode == 0, history.stderr
    assert f"{debris.name}: left out, no finished cell" in history.stdout + history.stderr
    resumed = in_process("sweep", m.name, "--out", "r", "--resume", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert f"2 finished cells reused from {run}" in resumed.stderr


@pytest.mark.slow     # sweeps as subprocesses
def test_only_debris_is_said_with_a_command_that_works(tmp_path: Path) -> None:
    # GIVEN a matrix folder holding only a sweep stopped before its first cell
    matrix(tmp_path)
    assert pipe_to_head(["sweep", "m.yaml", "--out", "r"], tmp_path) == 130
    # WHEN report and history are asked for the newest run
    report = in_process("report", "r/pp", cwd=tmp_path)
    history = in_process("history", "r/pp", cwd=tmp_path)
    # THEN both refuse it as bad input, and the command they suggest runs
    for got in (report, history):
        assert got.returncode == 2, got.stderr
        assert "no run here holds a finished cell" in got.stderr
    fix = report.stderr.rsplit("read one as it is: ", 1)[1].strip()
    shown = in_process(*fix.split()[1:], cwd=tmp_path)
    assert shown.returncode == 4, shown.stderr          # the run, said incomplete
    assert "Traceback" not in shown.stderr
    # AND the sweep they suggest running again, run as printed (no MATRIX to fill in,
    # the --out it was swept with kept), makes the run that report and history then read
    agains = {got.stderr.split("harness sweep ", 1)[1].split(")")[0].split(",")[0].strip()
              for got in (report, history)}
    assert agains == {"m.yaml --out r"}, (report.stderr, history.stderr)
    rerun = in_process("sweep", *agains.pop().split(), cwd=tmp_path)
    assert rerun.returncode == 0, rerun.stderr
    for command in ("report", "history"):
        again = in_process(command, "r/pp", cwd=tmp_path)
        assert again.returncode == 0, again.stderr


def test_a_reader_that_leaves_mid_sweep_keeps_the_finished_cells(tmp_path: Path) -> None:
    # GIVEN a sweep of two cells, its stderr read line by line
    matrix(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "harness", "sweep", "m.yaml", "--out",
                             "r"], cwd=tmp_path, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None and proc.stdout is not None
    # WHEN the reader leaves once the first cell is done
    for line in proc.stderr:
        if "a.cpu.s: ok within run" in line:
            break
    proc.stderr.close()
    proc.stdout.close()
    code = proc.wait(timeout=300)
    # THEN it ended as an interruption, with the first cell kept for --resume
    assert code == 130
    (run,) = (tmp_path / "r" / "pp").iterdir()
    assert cells_done(run) == {"a.cpu.s"}
    resumed = in_process("sweep", "m.yaml", "--out", "r", "--resume", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "1 finished cell reused" in resumed.stderr
    assert cells_done(run) == {"a.cpu.s", "b.cpu.s"}


def test_a_full_stdout_is_said_and_the_exit_code_kept(tmp_path: Path) -> None:
    # GIVEN a sweep whose stdout is a full device
    matrix(tmp_path)
    with open(os.devnull if not Path("/dev/full").exists() else "/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "harness", "sweep", "m.yaml", "--out",
                               "r"], cwd=tmp_path, env=ENV, stdout=full,
                              stderr=subprocess.PIPE, text=True, check=False, timeout=300)
    # THEN the cells ran, the answer is its exit code, and the lost output is said
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr
    if Path("/dev/full").exists():
        assert "stdout could not be written (No space left on device)" in proc.stderr


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A folder with m.yaml and its sweep in r/pp/<timestamp> (the second path)."""
    tmp = tmp_path_factory.mktemp("swept")
    matrix(tmp)
    got = in_process("sweep", "m.yaml", "--out", "r", cwd=tmp)
    assert got.returncode == 0, got.stderr
    (run,) = (tmp / "r" / "pp").iterdir()
    return tmp, run


@pytest.fixture(scope="module")
def whole_code(swept: tuple[Path, Path]) -> Callable[[list[str]], int]:
    """A command's exit code when read whole, in the swept folder: each command run
    once for the module (the tests below ask again for the same few), in this process
    (the code is the reference; the tests run the command as a process to see it end)."""
    cwd, _ = swept
    seen: dict[tuple[str, ...], int] = {}

    def code(argv: list[str]) -> int:
        if tuple(argv) not in seen:
            # (`doctor` with no matrix asks the engines: this suite refuses Docker to an
            # unmarked test's own process, not to a command it starts)
            run = harness if argv == ["doctor"] else in_process
            seen[tuple(argv)] = run(*argv, cwd=cwd).returncode
        return seen[tuple(argv)]
    return code


COMMANDS = [["--help"], ["sweep", "--help"], ["sweep", "m.yaml", "--list"],
            ["report", "r/pp"], ["report", "r/pp", "--format", "markdown"],
            ["history", "r/pp"], ["explain", "r/pp"], ["doctor"], ["doctor", "m.yaml"],
            ["images", "--help"], ["compare", "r/pp/RUN", "r/pp/RUN"], ["report", "nothere"],
            ["bisect", "m.yaml", "--good", "a", "--bad", "b", "--out", "r"],
            ["fit", "--help"], ["watch", "--help"], ["explain", "--help"],
            ["images", "list", "--recipes", str(ROOT / "images" / "images.yaml")],
            ["history", "r/pp", "--no-html"], ["report", "r/pp", "--format", "json"]]


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(a) for a in COMMANDS])
def test_every_command_ends_honestly_when_its_reader_leaves(
        swept: tuple[Path, Path], whole_code: Callable[[list[str]], int],
        argv: list[str]) -> None:
    cwd, run = swept
    argv = [a.replace("r/pp/RUN", str(run)) for a in argv]
    # GIVEN the command's exit code when read whole
    whole = whole_code(argv)
    assert whole in README_CODES
    # WHEN stdout's reader leaves before the first byte
    proc = subprocess.Popen([sys.executable, "-m", "harness", *argv], cwd=cwd, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=300)
    # THEN no traceback, and the code is the command's own (or the interruption's
    # where it runs cells and its progress has nowhere to go)
    assert "Traceback" not in err.decode() and "Exception ignored" not in err.decode()
    assert proc.returncode in (whole, 130), err.decode()
    # AND with stdout and stderr both closed, the same
    both = pipe_to_head(argv, cwd)
    assert both in (whole, 130) and both in README_CODES


def test_a_sweep_read_in_part_exits_as_the_sweep_does(tmp_path: Path) -> None:
    """Issue 51: `harness sweep m.yaml | head -1` exited 1 where the README said 130: its
    table follows the cells, so the reader leaves after they ran and the answer (a leak)
    stands; the README says so now."""
    # GIVEN a sweep that finds a leak, its stdout read for one line (stderr elsewhere)
    matrix(tmp_path)
    (tmp_path / "s.py").write_text(SCENARIO.replace("append(1)", "append(bytearray(99999))"))
    proc = subprocess.Popen([sys.executable, "-m", "harness", "sweep", "m.yaml", "--out", "r"],
                            cwd=tmp_path, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    _, err = proc.communicate(timeout=300)
    # THEN it exits as the sweep does (1, a leak found), quietly, every cell kept
    assert first.startswith("row ") and proc.returncode == 1, err
    assert "Traceback" not in err and "Exception ignored" not in err and "closed" not in err
    (run,) = (tmp_path / "r" / "pp").iterdir()
    assert cells_done(run) == {"a.cpu.s", "b.cpu.s"}
    # AND the README says what happened, not "exits 130"
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "`harness sweep m.yaml | head -1` exits 130" not in readme
    assert ("(`harness sweep m.yaml | head -1`: the table follows the cells) or closed (`>&-`) "
            "leaves the exit code as it is") in readme


@pytest.mark.parametrize("argv", [["--help"], ["report", "r/pp"], ["history", "r/pp"],
                                  ["sweep", "m.yaml", "--out", "r2"]], ids=" ".join)
@pytest.mark.parametrize("closed", [">&-", "2>&-", ">&- 2>&-"],
                         ids=["stdout-closed", "stderr-closed", "both-closed"])
def test_a_closed_output_keeps_the_exit_code(swept: tuple[Path, Path],
                                             whole_code: Callable[[list[str]], int],
                                             argv: list[str], closed: str) -> None:
    """Issue 51: `harness report DIR >&-` was a traceback, exit 120 (sys.stdout is None
    where the descriptor is closed): nobody reads it, as where a reader left."""
    cwd, _ = swept
    line = " ".join([sys.executable, "-m", "harness", *argv])
    got = subprocess.run(["bash", "-c", f"{line} {closed}"], cwd=cwd, env=ENV,
                         capture_output=True, text=True, check=False, timeout=300)
    assert "Traceback" not in got.stderr and "Exception ignored" not in got.stderr
    if argv == ["--help"] and closed.startswith(">&-"):
        # Issue 63 item 12: the help is the answer; to a closed stdout it was not
        # printed: exit 3, as README's table says (and as > /dev/full is)
        assert got.returncode == 3, got.stderr
        if closed == ">&-":
            assert "stdout is closed; the help was not printed (exit 3)" in got.stderr
        return
    assert got.returncode == whole_code(argv), got.stderr


def test_a_loud_scenario_leaves_a_capped_agent_log_and_says_so(tmp_path: Path) -> None:
    from harness.agent.output import CAP_BYTES

    # GIVEN a scenario printing 100 KB per call for 100 calls (10 MB)
    (tmp_path / "s.py").write_text("def setup(params):\n    return []\n\n\n"
                                   "def step(state):\n    print('x' * 99999)\n"
                                   "    print('the last words', flush=True)\n")
    (tmp_path / "m.yaml").write_text(
        "name: loud\nruntime: local\ndefaults: {iterations: 90, warmup: 10, sample_every: 5, "
        "repeats: 0}\nmatrix:\n  image: [{name: a, python: python3}]\n  scenario: [s.py]\n")
    # WHEN it is swept
    got = in_process("sweep", "m.yaml", "--out", "r", cwd=tmp_path)
    assert got.returncode in (0, 4), got.stderr
    # THEN its agent.log holds the cap and a note, and its result says what was dropped
    (cell,) = (tmp_path / "r" / "loud").glob("*/cells/a.cpu.s")
    log = (cell / "agent.log").read_bytes()
    # (its head, half the cap, and its last quarter of the cap: one loud stream)
    assert CAP_BYTES * 3 // 4 <= len(log) <= CAP_BYTES * 3 // 4 + 1000
    assert log.rstrip().endswith(b"the last words")   # the end is never what is dropped
    dropped = 100 * (100000 + len("the last words\n")) - CAP_BYTES * 3 // 4
    assert f"harness: {dropped} bytes of the scenario's output dropped".encode() in log
    result = (cell / "result.json").read_text()
    assert f'"output_dropped": {dropped}' in result.replace('":', '": ').replace(":  ", ": ")
    assert f"agent.log: {dropped} bytes of the scenario's output dropped" in result


def test_a_closed_stream_wakes_a_main_thread_that_waits_on_the_lanes() -> None:
    import threading

    from harness.errors import interruptible, stream_closed

    # GIVEN the main thread waiting on lanes (cells on other threads, done in 10 s)
    done = threading.Event()
    finish = threading.Timer(10, done.set)
    finish.start()
    early = False
    try:
        with interruptible():
            # WHEN a lane's progress line finds stderr closed
            threading.Timer(0.2, stream_closed).start()
            try:
                done.wait()
            except KeyboardInterrupt:
                early = not done.is_set()
    finally:
        finish.cancel()
    # THEN the main thread stops there (the sweep's Ctrl-C path), not once the cells end
    assert early
    assert not stream_closed()          # outside a run: nothing to stop


def test_a_sweep_that_cannot_be_resumed_in_place_says_how_to_resume_a_copy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    # GIVEN a finished sweep whose directory has become read-only (as a root user's
    # tests cannot make one, its lock file is refused as a read-only file system is)
    matrix(tmp_path)
    assert in_process("sweep", "m.yaml", "--out", "r", cwd=tmp_path).returncode == 0
    (run,) = (tmp_path / "r" / "pp").iterdir()
    opened = Path.open

    def read_only(path: Path, *args: object, **kwargs: object) -> object:
        if path.name == ".lock":
            raise OSError(30, "Read-only file system")
        return opened(path, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(Path, "open", read_only)
    # WHEN it is resumed
    assert main(["sweep", "m.yaml", "--out", "r", "--resume"]) == 3
    monkeypatch.undo()
    err = capsys.readouterr().err
    # THEN the fix line (not "--out DIR", where there is nothing to resume) runs as printed
    fix = re.search(r"fix: resume a copy: (.+)", err)
    assert fix is not None, err
    line = fix.group(1).replace("harness sweep", f"{sys.executable} -m harness sweep")
    done = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=ENV, capture_output=True,
                          text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "2 finished cells reused" in done.stderr
    assert (tmp_path / f"pp-{run.name}" / "results.json").is_file()


def test_resume_takes_a_matrixs_folder_of_runs_as_report_does(tmp_path: Path) -> None:
    # GIVEN a finished sweep under r/pp, and an unfinished one beside it
    matrix(tmp_path)
    assert in_process("sweep", "m.yaml", "--out", "r", cwd=tmp_path).returncode == 0
    (run,) = (tmp_path / "r" / "pp").iterdir()
    assert pipe_to_head(["sweep", "m.yaml", "--out", "r"], tmp_path) == 130
    # WHEN --resume is given the folder that `harness report r/pp` reads
    resumed = in_process("sweep", "m.yaml", "--resume", "r/pp", cwd=tmp_path)
    # THEN it continues the newest run with a finished cell, as report would show it
    assert resumed.returncode == 0, resumed.stderr
    assert f"2 finished cells reused from {run}" in resumed.stderr


def test_a_list_that_cannot_be_written_exits_3(tmp_path: Path) -> None:
    """Issue 51 item 8: `sweep --list > /dev/full` exited 0: the list is the answer, so
    a list that could not be written is exit 3, said, as --help's is."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    matrix(tmp_path)
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "harness", "sweep", "m.yaml", "--list"],
                              cwd=tmp_path, env=ENV, stdout=full, stderr=subprocess.PIPE,
                              text=True, check=False, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert "the list was not printed (exit 3)" in proc.stderr
