"""Issue 35 item 3: no setting is dropped without a word. A duplicated YAML key, a
`mem_limit` the runtime cannot apply, and `iterations` beside `max_iterations` are
errors (exit 2) naming the key path and its line, with a fix that loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import matrixfile
from harness.cli import main
from harness.errors import EXIT_BAD_INPUT, SpecError
from harness.matrixfile.load import check_applied

SCENARIO = "def setup(params):\n    return []\n\n\ndef step(state):\n    state.append(1)\n"
IMAGES = "  image: [{name: a, python: python3}]\n"


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "s.py").write_text(SCENARIO)
    path = tmp_path / "m.yaml"
    path.write_text(text)
    return path


CASES = {
    "duplicate scenario": (
        "name: x\nruntime: local\nmatrix:\n" + IMAGES + "  scenario: [s.py]\n"
        "  scenario: [s.py, {script: s.py, id: t}]\n",
        "matrix.scenario", 6, "duplicate key 'scenario' (first on line 5)"),
    "duplicate top key": (
        "name: x\nruntime: local\ndefaults: {iterations: 60}\ndefaults: {warmup: 3}\n"
        "matrix:\n" + IMAGES + "  scenario: [s.py]\n",
        "defaults", 4, "duplicate key 'defaults'"),
    "duplicate in a flow mapping": (
        "name: x\nruntime: local\ndefaults: {iterations: 60, iterations: 70}\n"
        "matrix:\n" + IMAGES + "  scenario: [s.py]\n",
        "defaults.iterations", 3, "duplicate key 'iterations'"),
    "mem_limit on local": (
        "name: x\nruntime: local\ndefaults: {iterations: 60}\nmatrix:\n" + IMAGES +
        "  scenario: [{script: s.py, mem_limit: 1g}]\n",
        "matrix.scenario[0].mem_limit", 6, "mem_limit is not applied by runtime local"),
    "shm_size on local": (
        "name: x\nruntime: local\ndefaults: {iterations: 60, shm_size: 2g}\nmatrix:\n"
        + IMAGES + "  scenario: [s.py]\n",
        "defaults.shm_size", 3, "shm_size is not applied by runtime local"),
    "network on local": (
        "name: x\nruntime: local\ndefaults: {iterations: 60}\nmatrix:\n" + IMAGES +
        "  scenario: [{script: s.py, network: false, params: {network: 1}}]\n",
        "matrix.scenario[0].network", 6, "network is not applied by runtime local"),
    "iterations beside max_iterations": (
        "name: x\nruntime: local\ndefaults: {iterations: 60, max_iterations: 100}\n"
        "matrix:\n" + IMAGES + "  scenario: [s.py]\n",
        "defaults.iterations", 3, "iterations beside max_iterations"),
    "iterations under an early stop of defaults": (
        "name: x\nruntime: local\ndefaults: {max_iterations: 100}\nmatrix:\n" + IMAGES +
        "  scenario: [{script: s.py, iterations: 50}]\n",
        "matrix.scenario[0].iterations", 6, "iterations under an early stop"),
}

FIXED = {   # each case as its fix line says to write it
    "duplicate scenario": ("  scenario: [s.py]\n  scenario: [s.py, {script: s.py, id: t}]\n",
                           "  scenario: [s.py, {script: s.py, id: t}]\n"),
    "duplicate top key": ("defaults: {iterations: 60}\ndefaults: {warmup: 3}\n",
                          "defaults: {iterations: 60, warmup: 3}\n"),
    "duplicate in a flow mapping": ("iterations: 60, iterations: 70", "iterations: 70"),
    "mem_limit on local": ("{script: s.py, mem_limit: 1g}", "s.py"),
    "shm_size on local": (", shm_size: 2g", ""),
    "network on local": ("network: false, ", ""),    # a param named network is the scenario's
    "iterations beside max_iterations": ("iterations: 60, ", ""),
    "iterations under an early stop of defaults": ("iterations: 50", "max_iterations: 50"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_dropped_setting_is_an_error_naming_its_key(tmp_path: Path, case: str,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    text, key, line, problem = CASES[case]
    path = write(tmp_path, text)
    # WHEN the matrix is loaded, for the runtime that runs it
    with pytest.raises(SpecError) as err:
        matrix = matrixfile.load(path)
        check_applied(matrix, matrix.runtime)
    # THEN it is refused, naming the key path and its line
    assert err.value.path == key and err.value.line == line, str(err.value)
    assert problem in str(err.value)
    # AND the command exits 2 (bad input), not 1 or 0 with the setting dropped
    assert main(["sweep", str(path), "--out", str(tmp_path / "r")]) == EXIT_BAD_INPUT
    assert f"m.yaml:{line}: {key}" in capsys.readouterr().err
    # AND the matrix written as the fix line says loads
    old, new = FIXED[case]
    path.write_text(text.replace(old, new))
    fixed = matrixfile.load(path)
    check_applied(fixed, fixed.runtime)
    assert fixed.cells


def test_a_slurm_block_applies_mem_limit_on_local(tmp_path: Path) -> None:
    # GIVEN runtime local under Slurm: the job's --mem applies the limit
    path = write(tmp_path, "name: x\nruntime: local\nslurm: {partition: debug}\n"
                           "defaults: {iterations: 60, mem_limit: 1g}\nmatrix:\n" + IMAGES +
                 "  scenario: [s.py]\n")
    # THEN it loads, and runs
    matrix = matrixfile.load(path)
    check_applied(matrix, matrix.runtime)
    assert matrix.cells[0].settings.mem_limit == "1g"


def test_a_runtime_named_on_the_command_line_is_the_one_checked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a docker matrix with a mem_limit, run with --runtime local
    path = write(tmp_path, "name: x\nruntime: docker\ndefaults: {iterations: 60, "
                           "mem_limit: 1g}\nmatrix:\n  image: [python:3.12-slim]\n"
                           "  scenario: [s.py]\n")
    code = main(["sweep", str(path), "--runtime", "local", "--out", str(tmp_path / "r")])
    # THEN the limit local cannot apply is refused before anything runs
    assert code == EXIT_BAD_INPUT
    assert "m.yaml:3: defaults.mem_limit: mem_limit is not applied by runtime local" in (
        capsys.readouterr().err)
    assert not (tmp_path / "r").exists()
