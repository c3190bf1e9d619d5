"""`harness sweep --list MATRIX` refuses what `harness sweep MATRIX` refuses of the
matrix, with the same error and exit code: a setting its runtime cannot honour, a
scenario that does not compile, an --iterations too short to decide."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main

SCENARIO = "def setup(params):\n    return None\n\n\ndef step(state):\n    pass\n"
BROKEN = "def setup(params):\n    return None\n\n\ndef step(state)\n    pass\n"


def matrix(tmp_path: Path, defaults: str, script: str = SCENARIO) -> Path:
    (tmp_path / "s.py").write_text(script)
    path = tmp_path / "m.yaml"
    path.write_text(f"name: m\nruntime: local\ndefaults: {defaults}\nmatrix:\n"
                    "  image: [{name: v1}]\n  gpu: [none]\n  scenario: [s.py]\n")
    return path


@pytest.mark.parametrize(("defaults", "script", "extra", "said"), [
    ("{iterations: 300, mem_limit: 2g}", SCENARIO, [],
     "defaults.mem_limit: mem_limit is not applied by runtime local"),
    ("{iterations: 300}", BROKEN, [], "SyntaxError"),
    ("{iterations: 300}", SCENARIO, ["--iterations", "5"], "cannot decide a trend"),
    ("{iterations: 300, sample_evry: 5}", SCENARIO, [], "unknown key 'sample_evry'"),
], ids=["mem_limit-on-local", "syntax-error", "iterations-too-short", "unknown-key"])
def test_list_refuses_what_the_sweep_refuses(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], defaults: str, script: str,
        extra: list[str], said: str) -> None:
    path = matrix(tmp_path, defaults, script)
    # WHEN the matrix is swept, and listed
    swept = main(["sweep", str(path), "-q", "--out", str(tmp_path / "r"), *extra])
    sweep_err = capsys.readouterr().err
    listed = main(["sweep", str(path), "--list", *extra])
    captured = capsys.readouterr()
    # THEN both refuse it: exit 2, the same error, no cell listed
    assert swept == listed == 2, (sweep_err, captured.err)
    assert said in sweep_err and captured.err == sweep_err
    assert captured.out == ""
    assert not (tmp_path / "r").exists()


def test_list_of_a_good_matrix_prints_its_cells(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", str(matrix(tmp_path, "{iterations: 300}")), "--list"]) == 0
    assert capsys.readouterr().out == "v1.cpu.s\n"


@pytest.mark.parametrize(("defaults", "script", "said"), [
    ("{iterations: 300, mem_limit: 2g}", SCENARIO,
     "defaults.mem_limit: mem_limit is not applied by runtime local"),
    ("{iterations: 300}", BROKEN, "SyntaxError"),
], ids=["mem_limit-on-local", "syntax-error"])
def test_doctor_fails_what_the_sweep_refuses_with_its_exit_code(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], defaults: str, script: str,
        said: str) -> None:
    path = matrix(tmp_path, defaults, script)
    # WHEN doctor checks a matrix the sweep refuses (exit 2)
    code = main(["doctor", str(path), "--out", str(tmp_path / "r")])
    out = capsys.readouterr().out
    # THEN it fails that check, with the fix, and exits 2 as the sweep does
    [failed] = [line for line in out.splitlines() if line.startswith("[FAIL]")]
    assert said in failed and "fix:" in out, out
    assert code == 2 == main(["sweep", str(path), "-q", "--out", str(tmp_path / "r")])
