"""Figures read as what they are (issue 35 item 5, second half): an unconfirmed timing
ratio never stands beside a bad verdict as if it were a finding (the table, the grid,
the issue draft), and a slowdown the cell's own run shows, or that interleaved rounds
against the baseline confirm (issue 63 item 8), is never hidden behind its leak."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sweepkit
from fakeruntime import Behaviour

from harness.cli import main
from harness.matrixfile.model import Cell
from harness.report.grid import token
from harness.result.model import CellResult, cell_text, load_result


def result(run: Path, cell: str) -> CellResult:
    return load_result(json.loads((run / "cells" / cell / "result.json").read_text()))


SWEPT_CALLS = 400


def behave(cell: Cell) -> Behaviour:
    """v2 leaks in both rows; in row s its steps are 30 % slower in its sweep's run alone
    (as a burst of load makes a run: a pooled ratio against v1 that its interleaved
    rounds, shorter runs, do not confirm), in row t they slow down as it runs."""
    if cell.image.label != "v2":
        return Behaviour()
    if cell.scenario.id == "s":
        swept = cell.scenario.settings.iterations == SWEPT_CALLS
        return Behaviour(leak_per_iter=16384, step_s=0.0013 if swept else 0.001)
    return Behaviour(leak_per_iter=16384, slowdown_per_iter=5e-6)


@pytest.fixture
def swept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
          capsys: pytest.CaptureFixture[str]) -> Path:
    sweepkit.on_the_cli(monkeypatch, behave)
    m = sweepkit.write_matrix(tmp_path, ["v1", "v2"], ["s.py", {"script": "s.py", "id": "t"}],
                              name="fig", gpus=["none"],
                              defaults={**sweepkit.DEFAULTS, "iterations": SWEPT_CALLS})
    assert main(["sweep", str(m), "-q", "--out", str(tmp_path / "r")]) == 1
    capsys.readouterr()
    [run] = list((tmp_path / "r" / "fig").iterdir())
    return run


def test_an_unconfirmed_ratio_is_not_shown_beside_a_leak(
        swept: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = result(swept, "v2.cpu.s")
    # GIVEN a leak whose pooled step time against v1 says slower, which the interleaved
    # rounds run for it did not confirm
    assert res.verdict == "leak" and res.vs_baseline is not None
    vs = res.vs_baseline
    assert vs.steps is not None and vs.steps.direction == "slower"
    assert vs.confirmation is not None and not vs.confirmation.confirmed, vs.confirmation
    assert vs.said_direction == "~"
    # THEN its words and its issue draft say the leak, not the ratio
    assert "unconfirmed" not in cell_text(res) and "baseline" not in cell_text(res)
    assert "slower" not in res.reason and not any(f.kind == "vs-baseline"
                                                  for f in res.findings), res.reason
    assert main(["report", str(swept), "--issue", "cpu.s"]) == 1
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
    assert main(["report", str(swept), "--issue", "cpu.t"]) == 1
    issue = capsys.readouterr().out
    # AND, its rounds against v1 confirming it slower too, that as well
    conf = res.vs_baseline.confirmation if res.vs_baseline is not None else None
    assert conf is not None and conf.confirmed, res.reason
    assert issue.startswith(
        f"# t leaks memory and slows down (late steps {ratio} early) and is "
        f"{conf.ratio:.2f}x slower than v1 (in {len(conf.decided_by)} interleaved rounds) "
        "in v2 (not in v1)"), issue.splitlines()[0]
