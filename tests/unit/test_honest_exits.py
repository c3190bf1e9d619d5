"""Issue 28 item 4: an honest exit on every path (a closed pipe, a cut-short samples
file, a fit param the scenario never reads, a timeout on every image, compare)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sweepkit import FakeSweep

ROOT = Path(__file__).resolve().parents[2]
H100 = ROOT / "tests" / "data" / "h100"


def reader_leaves(argv: list[str]) -> tuple[int, str]:
    """`harness ARGV | head -0`: the exit code and stderr of a command whose reader
    closed the pipe before reading a byte (as `| head -1` does to an answer longer
    than the pipe holds)."""
    proc = subprocess.Popen([sys.executable, "-m", "harness", *argv],
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err.decode()


@pytest.mark.parametrize("argv", [[], ["--format", "console"]])
def test_a_reader_that_leaves_keeps_the_answers_exit_code(tmp_path: Path,
                                                          argv: list[str]) -> None:
    # GIVEN a recorded run with leaks in it (its exit code is 1, whoever reads it)
    run = Path(shutil.copytree(H100 / "gpu-real", tmp_path / "gpu-real"))
    whole = subprocess.run([sys.executable, "-m", "harness", "report", str(run), *argv],
                           env={**os.environ, "PYTHONPATH": str(ROOT)},
                           capture_output=True, check=False)
    # WHEN the reader closes the pipe before reading
    code, err = reader_leaves(["report", str(run), *argv])
    # THEN the command exits as it does when read whole, and says nothing of the pipe
    assert code == whole.returncode, err
    assert code == 1    # --format exits as `report` does
    assert "Traceback" not in err and "Exception ignored" not in err and "Broken" not in err


SCENARIO = "def setup(params):\n    return None\n\n\ndef step(state):\n    pass\n"


@pytest.fixture
def timeouts(monkeypatch: pytest.MonkeyPatch) -> dict[str, set[str]]:
    """The CLI's runtime is a FakeRuntime; a cell times out when its scenario id maps
    to a set holding its image's label."""
    from fakeruntime import Behaviour, FakeRuntime

    from harness.matrixfile.model import Cell

    killed: dict[str, set[str]] = {}

    def behave(cell: Cell) -> Behaviour:
        return Behaviour(timed_out=cell.image.label in killed.get(cell.scenario.id, ()))

    monkeypatch.setattr("harness.runtimes.get_runtime",
                        lambda name, docker_host=None: FakeRuntime(behave))
    return killed


def timeout_matrix(tmp_path: Path) -> Path:
    (tmp_path / "s.py").write_text(SCENARIO)
    path = tmp_path / "m.yaml"
    path.write_text("name: slow\nruntime: local\n"
                    "defaults: {iterations: 300, warmup: 10, sample_every: 5, repeats: 0, "
                    "timeout: 45}\nmatrix:\n  image: [{name: v1}, {name: v2}, {name: v3}]\n"
                    "  gpu: [none]\n  scenario: [s.py, {script: s.py, id: big}]\n")
    return path


def test_a_timeout_on_every_image_is_a_run_too_short_exit_2(
        tmp_path: Path, timeouts: dict[str, set[str]],
        capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    # GIVEN a row whose scenario is killed at its 45 s deadline on every image
    timeouts["big"] = {"v1", "v2", "v3"}
    argv = ["sweep", str(timeout_matrix(tmp_path)), "-q", "--out", str(tmp_path / "r")]
    # THEN the sweep says what to change, as for a crash on every image, and exits 2
    assert main(argv) == 2
    out = capsys.readouterr().out
    assert ("cpu.big: killed at its timeout on every image: the run is too short for the "
            "scenario; raise `timeout:` (now 45s) or lower `iterations:` (now 300); these "
            "are not findings about the images") in out
    assert "bad from the first image" not in out and "first bad:" not in out
    # AND no issue draft is written for it (it would be about no image)
    [run] = list((tmp_path / "r" / "slow").iterdir())
    assert main(["report", str(run), "--issue", "cpu.big"]) == 2
    err = capsys.readouterr().err
    assert "the run is too short for the scenario" in err and not re.search(r"\bhang", err)


def test_a_budgeted_run_killed_on_every_image_names_its_budget_not_iterations(
        tmp_path: Path, timeouts: dict[str, set[str]],
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 79 item 6: a run of a time budget (no `iterations:` anywhere) was told to
    lower `iterations:` (now 2000), and its reason said `killed at the 0s deadline`."""
    from harness.cli import main

    # GIVEN a budgeted row (early stop's cap, the default budget) killed on every image
    path = timeout_matrix(tmp_path)
    path.write_text(path.read_text().replace("iterations: 300", "max_iterations: 300"))
    timeouts["big"] = {"v1", "v2", "v3"}
    assert main(["sweep", str(path), "-q", "--out", str(tmp_path / "r")]) == 2
    out = capsys.readouterr().out
    # THEN the fix names what was set: the timeout and the budget, not iterations
    assert ("cpu.big: killed at its timeout on every image: the run is too short for the "
            "scenario; raise `timeout:` (now 45s) or lower `budget:` (now 5s, the default)"
            ) in out
    assert not [line for line in out.splitlines() if "timeout:" in line and "iterations" in line]
    # AND each cell says how long it ran before it was killed (the fake runtime's 10 ms)
    [run] = list((tmp_path / "r" / "slow").iterdir())
    reason = json.loads((run / "cells" / "v1.cpu.big" / "result.json").read_text())["reason"]
    assert "killed at its deadline after 10 ms" in reason and "0s" not in reason


def test_a_timeout_on_some_images_is_a_finding_and_no_hang(
        tmp_path: Path, timeouts: dict[str, set[str]],
        capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    timeouts["big"] = {"v2", "v3"}
    argv = ["sweep", str(timeout_matrix(tmp_path)), "-q", "--out", str(tmp_path / "r")]
    assert main(argv) == 1
    assert "cpu.big: first bad: v2 (last good: v1)" in capsys.readouterr().out
    [run] = list((tmp_path / "r" / "slow").iterdir())
    assert main(["report", str(run), "--issue", "cpu.big"]) == 1
    issue = capsys.readouterr().out
    assert issue.startswith("# big does not finish within its timeout in v2 (not in v1)")
    assert not re.search(r"\bhang", issue)


def test_a_samples_file_cut_short_is_unreadable_when_decided_again(
        fake_sweep: FakeSweep, capsys: pytest.CaptureFixture[str]) -> None:
    from fakeruntime import Behaviour

    from harness.cli import main

    # GIVEN a sweep: v2 and v4 leak, v3 is killed at its timeout and v5's agent died
    # mid-write (neither of those two wrote an end record: their outcome decides them)
    run = fake_sweep(["v1", "v2", "v3", "v4", "v5"], {
        "v2": Behaviour(leak_per_iter=16384), "v3": Behaviour(timed_out=True),
        "v4": Behaviour(leak_per_iter=16384), "v5": Behaviour(truncate=True)},
        ["s.py"], name="cut", gpus=["none"], files={"s.py": SCENARIO}).root
    assert main(["report", str(run)]) == 1
    assert "cpu.s: first bad: v2 (last good: v1)" in capsys.readouterr().out
    # WHEN v2's samples.jsonl loses its tail after the run: the end record, and the
    # last sample cut in the middle
    samples = run / "cells" / "v2.cpu.s" / "samples.jsonl"
    lines = samples.read_text().splitlines(keepends=True)
    assert '"type": "end"' in lines[-1]
    samples.write_text("".join(lines[:-2]) + lines[-2][: len(lines[-2]) // 2])
    code = main(["report", str(run), "--reanalyze", "--write"])
    out = capsys.readouterr().out
    # THEN v2 is unreadable, not a crash ("no end record"), and no first bad is named
    # past it; the killed and the died cells are decided from their outcome as before
    assert "v2.cpu.s: leak -> unreadable (samples.jsonl cut short" in out
    assert "leak -> crash" not in out
    assert "first bad: v4" not in out and "first bad is v2 or later, up to v3" in out
    assert "v3.cpu.s: timeout" not in out and "v5.cpu.s: crash" not in out   # unchanged
    assert "not a complete answer: 1 of 5 planned cells missing (v2.cpu.s)" in out
    assert code == 1                  # v3's timeout and v4's leak are still bad
    # AND the re-decided copy says it lacks v2, as the report of it does
    assert main(["report", str(run) + "-reanalyzed"]) == 1
    again = capsys.readouterr().out
    assert "1 of 5 planned cells missing" in again and "first bad: v4" not in again


READS = """\
def setup(params):
    return {"data": [0] * params["batch"], "keys": params.get("keys", 4)}


def step(state):
    state["data"].append(state["keys"])
    state["data"].pop()
"""


def fit_matrix(tmp_path: Path, scenario: str = READS) -> Path:
    (tmp_path / "reads.py").write_text(scenario)
    path = tmp_path / "m.yaml"
    path.write_text("name: reads\nruntime: local\n"
                    "defaults: {iterations: 20, warmup: 2, sample_every: 5, repeats: 0}\n"
                    f"matrix:\n  image: [{{name: py, python: {sys.executable}}}]\n"
                    "  scenario: [{script: reads.py, params: {batch: 2}}]\n")
    return path


def test_fit_of_a_param_the_scenario_never_reads_is_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    # GIVEN a scenario whose setup reads params["batch"] and params.get("keys")
    argv = ["fit", str(fit_matrix(tmp_path)), "--out", str(tmp_path / "r"), "-q"]
    # WHEN a fit varies a param it never reads (the local runtime, the real agent)
    code = main([*argv, "--param", "nosuch=1..8"])
    captured = capsys.readouterr()
    # THEN the first probe stops it, naming what the scenario read
    assert code == 2, captured.out + captured.err
    assert ("fit --param nosuch: the scenario's setup never read params['nosuch'] (it "
            "read: batch, keys)") in captured.err
    assert "the whole range" not in captured.out
    # one probe ran, not the range
    assert len(list((tmp_path / "r" / "reads" / "fit-nosuch" / "cells").iterdir())) == 1
    # AND a param it reads is fitted as before
    assert main([*argv, "--param", "batch=1..2"]) == 0
    assert "fits 2 (the whole range)" in capsys.readouterr().out


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    """One recorded run (leaks in it) in two directories: the same verdicts on both."""
    return (Path(shutil.copytree(H100 / "gpu-real", tmp_path / "a" / "gpu-real")),
            Path(shutil.copytree(H100 / "gpu-real", tmp_path / "b" / "gpu-real")))


def test_compare_says_its_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    assert main(["compare", "--help"]) == 0
    out = capsys.readouterr().out
    assert "exit codes:" in out and "even where both sides agree" in out
    # words, not line breaks: --help is fitted to the terminal (cli.FittedHelpFormatter)
    assert "the same directory twice (but one of a `hosts:` sweep)" in " ".join(out.split())
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert '"no differences in verdict" with a leak on both hosts still exits 1' in readme


def test_compare_of_two_runs_that_agree_on_a_leak_exits_1(
        two_runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    a, b = two_runs
    assert main(["compare", str(a), str(b)]) == 1
    assert "no differences in verdict" in capsys.readouterr().out


@pytest.mark.parametrize("second", ["{a}", "{a}/", "{a}/../gpu-real"])
def test_compare_of_one_directory_twice_is_exit_2(
        two_runs: tuple[Path, Path], second: str, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    a, _ = two_runs
    assert main(["compare", str(a), second.format(a=a)]) == 2
    err = capsys.readouterr().err
    assert "are one directory (the cells of one host: local): nothing to compare" in err
    assert "compare needs two results directories" not in err   # not "one host's cells"


@pytest.mark.parametrize("width", [70, 80, 100])
@pytest.mark.parametrize("how", ["--width", "COLUMNS"])
def test_compare_table_fits_the_width(two_runs: tuple[Path, Path], width: int, how: str,
                                      monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    a, b = two_runs
    argv = ["compare", str(a), str(b)]
    if how == "COLUMNS":
        monkeypatch.setenv("COLUMNS", str(width))     # piped (capsys): $COLUMNS counts
    else:
        argv += ["--width", str(width)]
    main(argv)
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= width
    text = "\n".join(lines)
    for word in ("fft_plans_capped", "gpu_fft_plans", "rfft_const", "1.00x"):
        assert word in text            # wrapped, never cut
    monkeypatch.delenv("COLUMNS", raising=False)
    main(["compare", str(a), str(b)])    # piped, no width: one line per row
    plain = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in plain) > 100


def test_a_reader_that_leaves_mid_print_stops_the_printing_only() -> None:
    import io

    from harness.cli import ReaderMayLeave

    # GIVEN stdout on a pipe whose reader takes the first line and leaves
    r, w = os.pipe()
    out = io.TextIOWrapper(io.BufferedWriter(io.FileIO(w, "w")), encoding="utf-8")
    stdout = ReaderMayLeave(out)
    stdout.write("first line\n")
    stdout.flush()
    with os.fdopen(r, "rb") as reader:
        assert reader.readline() == b"first line\n"
    # WHEN the answer goes on printing, more than the pipe holds
    for _ in range(1000):
        assert stdout.write("x" * 199 + "\n") == 200
    stdout.flush()
    # THEN no error reached the command, and the rest went nowhere
    assert stdout.left
    out.close()
