"""Issue 87 item 8: `harness sweep big.py`, a scenario where a matrix belongs, said only
"not valid YAML"; now it says what the file is, what belongs there, and writes the
matrix that would run it."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main

SCENARIO = '''
def setup(params):
    return []


def step(state):
    state.append(bytes(1000))
'''


def test_a_scenario_given_as_the_matrix_is_named_with_the_matrix_it_needs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "big.py").write_text(SCENARIO)
    assert main(["sweep", str(tmp_path / "big.py")]) == 2
    err = capsys.readouterr().err
    assert "a Python file, where a matrix YAML file belongs" in err, err
    assert "`matrix: {image: [python3], scenario: [big.py]}`" in err, err
    assert "Traceback" not in err and "not valid YAML" not in err, err
