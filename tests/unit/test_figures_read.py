"""Figures read as what they are (issue 35 item 5, second half): an unconfirmed timing
ratio never stands beside a bad verdict as if it were a finding (the table, the grid,
the issue draft), and a slowdown the cell's own run shows is never hidden behind its
leak."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sweepkit
from fakeruntime import Behaviour

from harness.cli import main
from harness.matrixfile.model import Cell
from harness.report.grid import token
from harness.result.model import CellResult, load_result
from harness.result.words import cell_text


def result(run: Path, cell: str) -> CellResult:
    return load_result(json.loads((run / "cells" / cell / "result.json").read_text()))


def behave(cell: Cell) -> Behaviour:
    """v2 leaks in both rows; in row s its steps are 30 % slower throughout (a pooled
    ratio against v1 that no rounds confirm), in row t they slow down as it runs."""
    if cell.image.label != "v2":
        return Behaviour()
    if cell.scenario.id == "s":
        return Behaviour(leak_per_iter=16384, step_s=0.0013)
    return Behaviour(leak_per_iter=16384, slowdown_per_iter=5e-6)


@pytest.fixture
def swept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
          capsys: pytest.CaptureFixture[str]) -> Path:
    sweepkit.on_the_cli(monkeypatch, behave)
    m = sweepkit.write_matrix(tmp_path, ["v1", "v2"], ["s.py", {"script": "s.py", "id": "t"}],
                              name="fig", gpus=["none"],
                              defaults={**sweepkit.DEFAULTS, "iterations": 400})
    assert main(["sweep", str(m), "-q", "--out", str(tmp_path / "r")]) == 1
    capsys.readouterr()
    [run] = list((tmp_path / "r" / "fig").iterdir())
    return run


def test_an_unconfirmed_ratio_is_not_shown_beside_a_leak(
        swept: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = result(swept, "v2.cpu.s")
    # GIVEN a leak whose pooled step time against v1 says slower, never confirmed
    assert res.verdict == "leak" and res.vs_baseline is not None
    assert res.vs_baseline.steps is not None and res.vs_baseline.confirmation is None
    assert res.vs_baseline.said_direction == "slower"
    # THEN its words and its issue draft say the leak, not the ratio
    assert "unconfirmed" not in cell_text(res) and "baseline" not in cell_text(res)
    assert main(["report", str(swept), "--issue", "cpu.s"]) == 0
    issue = capsys.readouterr().out
    assert issue.startswith("# s leaks memory in v2 (not in v1)")
    assert "unconfirmed" not in issue and "1.30x" not in issue, issue


def test_a_leak_that_also_slows_down_says_both(
        swept: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = result(swept, "v2.cpu.t")
    # GIVEN a leak whose steps slow down within its own run
    assert res.verdict == "leak" and res.steps is not None and res.steps.slowdown
    ratio = f"{res.steps.ratio:.2f}x"
    # THEN its words, its grid token and its issue draft say both
    assert f"late steps {ratio} early" in cell_text(res), cell_text(res)
    assert token("leak", res).startswith("L16+S"), token("leak", res)
    assert main(["report", str(swept), "--issue", "cpu.t"]) == 0
    issue = capsys.readouterr().out
    assert issue.startswith(
        f"# t leaks memory and slows down (late steps {ratio} early) in v2 (not in v1)"), \
        issue.splitlines()[0]
