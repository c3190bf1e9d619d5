"""Issue 35 item 3, the host's side: a scenario mistake (one of setup()/step() without
the other, a misspelled `def stpe`, a step that calls sys.exit) is exit 2 naming the
file and what is missing, before any image is prepared; a whole script says so on its
progress line and in its result, and one that ended too soon is not told "run longer"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakeruntime import Behaviour, FakeRuntime

from harness.cli import main
from harness.errors import EXIT_BAD_INPUT, EXIT_UNDECIDED

ROOT = Path(__file__).resolve().parents[2]
MISTAKES = {
    "misspelled step": ("def setup(params):\n    return []\n\n\ndef stpe(state):\n"
                        "    state.append(1)\n",
                        "s.py: defines setup() but no step() (is `stpe` meant to be `step`?)"),
    "no setup": ("def step(state):\n    pass\n", "s.py: defines step() but no setup()"),
    "no step": ("def setup(params):\n    return 1\n", "s.py: defines setup() but no step()"),
    "step exits": ("import sys\n\n\ndef setup(params):\n    return []\n\n\n"
                   "def step(state):\n    sys.exit(0)\n",
                   "s.py:9: step() calls sys.exit(), which ends the run"),
}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeRuntime:
    runtime = FakeRuntime(lambda cell: Behaviour())
    monkeypatch.setattr("harness.runtimes.get_runtime",
                        lambda name, docker_host=None: runtime)
    return runtime


@pytest.mark.parametrize("case", MISTAKES)
@pytest.mark.parametrize("command", [["sweep"], ["fit", "--param", "n=1..4"],
                                     ["bisect", "--good", "a", "--bad", "b"]])
def test_a_scenario_mistake_is_exit_2_before_any_image(
        tmp_path: Path, fake: FakeRuntime, case: str, command: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    text, words = MISTAKES[case]
    (tmp_path / "s.py").write_text(text)
    (tmp_path / "m.yaml").write_text(
        "name: sm\nruntime: local\ndefaults: {iterations: 60, warmup: 5, sample_every: 5}\n"
        "matrix:\n  image: [{name: a, pip: [demo==1]}, {name: b, pip: [demo==2]}]\n"
        "  scenario: [s.py]\n")
    # WHEN a command that runs cells is given it
    code = main([command[0], str(tmp_path / "m.yaml"), *command[1:], "--out",
                 str(tmp_path / "r")])
    # THEN bad input, naming the file and what is missing, and nothing was prepared or run
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT, err
    assert words in err and "fix:" in err
    assert fake.prepared == [] and fake.runs == []
    assert not (tmp_path / "r").exists()


def test_a_whole_script_says_so_and_is_not_told_to_run_longer(tmp_path: Path) -> None:
    # GIVEN a plain script (no setup/step) that ends at once
    (tmp_path / "s.py").write_text("data = [0] * 10\n")
    (tmp_path / "m.yaml").write_text(
        "name: ws\nruntime: local\ndefaults: {iterations: 100, warmup: 5, sample_every: 5, "
        "repeats: 2}\nmatrix:\n  image: [{name: a, python: python3}]\n  scenario: [s.py]\n")
    # WHEN it is swept
    proc = subprocess.run([sys.executable, "-m", "harness", "sweep", "m.yaml", "--out", "r"],
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT),
                                             "COLUMNS": "300"},
                          capture_output=True, text=True, check=False, timeout=300)
    # THEN its progress line says whole script, it ran once (no "running again with
    # 200 iterations"), its result says why it could not decide, and the note does not
    # send the reader to --iterations
    assert proc.returncode == EXIT_UNDECIDED, proc.stderr
    assert "a.cpu.s: running (a whole script (no setup/step), run once)" in proc.stderr
    assert "running again" not in proc.stderr
    (result,) = (tmp_path / "r" / "ws").glob("*/cells/a.cpu.s/result.json")
    data = json.loads(result.read_text())
    assert data["end"]["mode"] == "script" and len(data["attempts"]) == 1
    assert "a whole script (no setup()/step()), run once, ended too soon" in data["reason"]
    assert "run longer" not in proc.stdout and "define setup(params)" in proc.stdout
