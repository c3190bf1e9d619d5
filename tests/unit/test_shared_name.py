"""Issue 79 (a new user): a copy of a matrix, changed and run with its `name:` kept,
took over `report`, `history` and `compare` (they read the newest run of the name) with
no word. The sweep says so as it starts, naming the other file and the fix."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.cli import main

MATRIX = """name: shared
runtime: local
defaults: {{iterations: 40, warmup: 5, repeats: 0}}
matrix:
  image: [{{name: {image}, python: {python}}}]
  scenario: [s.py]
"""


def test_a_second_matrix_file_with_the_same_name_is_said(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "s.py").write_text("def setup(p):\n    return 1\ndef step(s):\n    pass\n")
    for file, image in (("a.yaml", "one"), ("b.yaml", "two")):
        (tmp_path / file).write_text(MATRIX.format(image=image, python=sys.executable))
    out = str(tmp_path / "r")
    assert main(["sweep", str(tmp_path / "a.yaml"), "--out", out]) in (0, 4)
    first = capsys.readouterr().err
    assert main(["sweep", str(tmp_path / "a.yaml"), "--out", out]) in (0, 4)
    again = capsys.readouterr().err
    # WHEN the other file of the same name is swept into the same folder
    assert main(["sweep", str(tmp_path / "b.yaml"), "--out", out]) in (0, 4)
    other = capsys.readouterr().err
    # THEN it says which file shares the name, and the fix; a run of the same file does not
    assert "another matrix file named" not in first + again
    assert "also holds runs of" in other and "a.yaml, another matrix file named 'shared'" \
        in other.replace("\n", " "), other
    assert "fix: give b.yaml a name: of its own" in other, other
