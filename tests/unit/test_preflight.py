"""Issue 15 point 2: scenario bugs are the user's input, not findings about images."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.answers.search import answer_rows
from harness.cli import main
from harness.report import Report
from harness.result.model import Planned
from harness.sweeping.course import exit_code
from tests.resultkit import as_results


def _matrix(tmp_path: Path, scenario: str, images: int = 2) -> Path:
    (tmp_path / "s.py").write_text(scenario)
    imgs = ", ".join(f"{{name: py{i}, python: {sys.executable}}}" for i in range(images))
    path = tmp_path / "m.yaml"
    path.write_text("name: pre\nruntime: local\ndefaults: {iterations: 40, warmup: 2, "
                    f"repeats: 0}}\nmatrix:\n  image: [{imgs}]\n  scenario: [s.py]\n")
    return path


def test_syntax_error_is_exit_2_with_file_and_line_before_any_cell(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = _matrix(tmp_path, "def setup(p):\n    return 1\n\ndef step(s)\n    pass\n")
    code = main(["sweep", str(m), "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{tmp_path / 's.py'}:4: SyntaxError" in err
    assert "Traceback" not in err
    assert not (tmp_path / "r").exists()          # no container/process, no results dir


def test_same_error_on_every_image_is_a_scenario_bug_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = _matrix(tmp_path, "def setup(p):\n    return 1\n\ndef step(s):\n    undefined_x\n")
    code = main(["sweep", str(m), "-q", "--out", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert code == 2, out
    assert "the scenario fails on every image (NameError" in out
    assert "first bad:" not in out and "bad from the first image" not in out
    [results] = list((tmp_path / "r" / "pre").glob("*/results.json"))
    assert json.loads(results.read_text())["rows"][0]["first_bad"] is None


def test_a_step_that_ends_the_process_on_every_image_is_the_scenarios_fault(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Issue 63 item 4: os._exit(0) in step (here out of the static check's sight) ends
    # every image's run with exit 0 and no end record: the scenario's fault, exit 2, as a
    # raise on every image is; not "bad from the first image", exit 1.
    m = _matrix(tmp_path, "import os\n\ndef setup(p):\n    return 1\n\n"
                "def step(s):\n    getattr(os, '_exit')(0)\n")
    code = main(["sweep", str(m), "-q", "--out", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert code == 2, out
    assert ("the scenario fails on every image (exit code 0 without an end record: the "
            "process ended itself, by os._exit in the scenario") in out, out
    assert "bad from the first image" not in out


def _cell(label: str, index: int, verdict: str, message: str) -> dict[str, object]:
    return {"row": "cpu.s", "image": {"label": label, "index": index},
            "gpu": {"label": "cpu"}, "scenario": {"id": "s"}, "id": f"{label}.cpu.s",
            "verdict": verdict, "reason": "", "fingerprint": {},
            "end": {"error": {"type": "ImportError", "message": message}}}


def test_different_errors_or_one_image_of_two_stay_findings() -> None:
    differ = {"a": _cell("a", 0, "crash", "no module x"), "b": _cell("b", 1, "crash", "y")}
    [row] = answer_rows(as_results(differ))
    assert row.scenario_error is None and row.first_bad == "a"
    same = {"a": _cell("a", 0, "crash", "m"), "b": _cell("b", 1, "crash", "m")}
    assert answer_rows(as_results(same))[0].scenario_error == "ImportError: m"
    assert exit_code(Report.from_results("x", as_results(same))) == 2
    # A row of one image that crashes crashes on every image of it: exit 2 as well
    one = {"a": _cell("a", 0, "crash", "m")}
    assert answer_rows(as_results(one))[0].scenario_error == "ImportError: m"
    assert exit_code(Report.from_results("x", as_results(one))) == 2
    # ... but one of two planned images, the other not run, speaks for no other image
    planned = [Planned("a", "cpu.s", "a", 0), Planned("b", "cpu.s", "b", 1)]
    [row] = answer_rows(as_results(one), planned)
    assert row.scenario_error is None and row.first_bad == "a"
    mixed = {"a": _cell("a", 0, "ok", ""), "b": _cell("b", 1, "crash", "m"),
             "c": _cell("c", 2, "crash", "m")}
    assert answer_rows(as_results(mixed))[0].first_bad == "b"
    assert exit_code(Report.from_results("x", as_results(mixed))) == 1
