"""`harness report DIR [--format F] [--issue ROW]` over a FakeRuntime sweep's directory."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import sweepkit
from fakeruntime import Behaviour

from harness.cli import main


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("cli_report")
    return sweepkit.swept(
        tmp, ["v1", "v2"], lambda c: Behaviour(leak_per_iter=16384)
        if c.image.label == "v2" and c.scenario.id == "loop" else Behaviour(),
        ["loop.py", {"script": "loop.py", "id": "zeros"}], name="rep",
        then=lambda store, _: store.write("results.json", {
            "name": "rep", "meta": {"matrix": str(tmp / "m.yaml")}})).root


@pytest.fixture
def rdir(swept: Path, tmp_path: Path) -> Path:
    """A private copy: `harness report` rewrites files in the directory."""
    return Path(shutil.copytree(swept, tmp_path / "run"))


def test_report_rewrites_every_file(rdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(rdir)]) == 1
    out = capsys.readouterr().out
    assert "gpu0.loop: first bad: v2 (last good: v1)" in out
    for name in ("results.json", "report.md", "report.html", "junit.xml"):
        assert (rdir / name).is_file(), name
    page = (rdir / "report.html").read_text()
    assert page.count("<svg") - page.count('class="trend"') == 4 * 4   # the cells' plots
    assert json.loads((rdir / "results.json").read_text())["schema"] == 2


@pytest.mark.parametrize("form", [["--issue", "gpu0.loop"], ["--issue", "v2.gpu0.loop"],
                                  ["--format", "json"], ["--format", "md"], ["-q"]])
def test_every_output_form_exits_as_report_does(rdir: Path, form: list[str],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a directory with a bad cell: `harness report DIR` exits 1
    plain = main(["report", str(rdir)])
    assert plain == 1
    # THEN the same results exit the same, whatever the output form
    assert main(["report", str(rdir), *form]) == plain, capsys.readouterr().err


@pytest.mark.parametrize(("fmt", "check"), [
    ("md", lambda s: s.startswith("# harness sweep: rep\n")),
    ("html", lambda s: s.startswith("<!DOCTYPE html>") and "<svg" in s),
    ("junit", lambda s: ET.fromstring(s.split("\n", 1)[1]).get("failures") == "1"),
    ("json", lambda s: json.loads(s)["bad_cells"] == ["v2.gpu0.loop"]),
])
def test_format_prints_one_rendering(rdir: Path, fmt: str, check: object,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in rdir.iterdir() if p.is_file()}
    assert main(["report", str(rdir), "--format", fmt]) == 1   # exits as `report` does
    assert callable(check) and check(capsys.readouterr().out)
    assert {p.name: p.stat().st_mtime_ns for p in rdir.iterdir() if p.is_file()} == before


def test_issue_is_written_and_printed(rdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # It exits as `harness report DIR` does on the same directory (a bad cell: 1)
    assert main(["report", str(rdir), "--issue", "gpu0.loop"]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("# loop leaks memory in v2 (not in v1)")
    assert "def step(state):" in captured.out  # the scenario, found next to the matrix
    assert (rdir / "issue-gpu0.loop.md").read_text() == captured.out
    assert "written:" in captured.err


@pytest.mark.parametrize(("argv", "message"), [
    (["--issue", "gpu0.zeros"], "--issue gpu0.zeros: the row has no bad cell"),
    (["--issue", "gpu7.x"], "--issue gpu7.x: no such row (allowed values: gpu0.loop, "
                            "gpu0.zeros)"),
    (["--format", "pdf"], "argument --format: invalid choice: 'pdf'"),
])
def test_bad_input_exits_2(rdir: Path, argv: list[str], message: str,
                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(rdir), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_result_json_of_the_wrong_shape_names_file_and_key(
        rdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = rdir / "cells" / "v1.gpu0.loop" / "result.json"
    data = json.loads(path.read_text())
    data["memory"]["heap"]["slope"] = "fast"
    path.write_text(json.dumps(data))
    assert main(["report", str(rdir)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: memory.heap.slope: expected a number, got 'fast'" in err
    assert "fix: re-run that cell" in err and "Traceback" not in err


def test_not_a_results_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "no such directory" in capsys.readouterr().err
    assert main(["report", str(tmp_path)]) == 2
    assert "not a results directory (no plan.json or cells/ here)" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []          # nothing written there


def test_report_of_a_sweep_name_takes_its_newest_run(rdir: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    base = tmp_path / "reports" / "rep"
    shutil.copytree(rdir, base / "20260101-000000")
    shutil.copytree(rdir, base / "20260102-000000")
    assert main(["report", str(base)]) == 1
    assert (base / "20260102-000000" / "report.md").is_file()
    assert not (base / "20260101-000000" / "report.md").exists()
    assert "gpu0.loop: first bad: v2" in capsys.readouterr().out


def test_issue_by_cell_id_writes_the_rows_issue(rdir: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(rdir), "--issue", "v2.gpu0.loop"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("# loop leaks memory in v2 (not in v1)")
    assert "## Reproduce without harness" in out and "{'" not in out
    assert (rdir / "issue-gpu0.loop.md").is_file()


@pytest.mark.parametrize("command", ["report", "explain", "culprit", "day"])
def test_a_file_in_place_of_a_results_directory_names_what_to_pass(
        command: str, rdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every command that reads a sweep's results refuses a file and a missing folder
    alike, and its fix names that command with the directory to pass."""
    (result,) = [p for p in rdir.iterdir() if p.name in ("plan.json", "results.json")][:1]
    assert main([command, str(result)]) == 2
    err = capsys.readouterr().err
    assert f"a file, not a results directory; pass the results directory it is in: " \
           f"harness {command} " in err, err
    assert main([command, str(rdir / "missing")]) == 2
    assert "no such directory" in capsys.readouterr().err
