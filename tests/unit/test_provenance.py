"""Every derived answer rests on the cells it names (issue 35 item 1): explain's where is
shown only beside the cells it was made from; after they changed the report says it
is stale and how to refresh it, or leaves it out; an unreadable cell is never called
first bad or explained."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fakeruntime import Behaviour, FakeRuntime

from harness.cli import main
from harness.matrixfile.model import Cell

SCENARIO = "def setup(params):\n    return None\n\n\ndef step(state):\n    pass\n"


def behave(cell: Cell) -> Behaviour:
    """demo 3 and later leak."""
    [pin] = cell.image.pip
    return Behaviour(leak_per_iter=16384) if int(pin.split("==")[1]) >= 3 else Behaviour()


def write_matrix(tmp: Path, pins: tuple[int, ...]) -> Path:
    images = ", ".join(f"{{name: v{i + 1}, pip: [demo=={pin}]}}" for i, pin in enumerate(pins))
    (tmp / "s.py").write_text(SCENARIO)
    path = tmp / "m.yaml"
    path.write_text("name: prov\nruntime: local\n"
                    "defaults: {iterations: 300, warmup: 10, sample_every: 5, repeats: 0}\n"
                    f"matrix:\n  image: [{images}]\n  gpu: [none]\n  scenario: [s.py]\n")
    return path


@pytest.fixture
def explained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
              capsys: pytest.CaptureFixture[str]) -> Path:
    """`harness sweep --explain` of v1..v4 pinned demo 1..4: first bad v3, explained."""
    monkeypatch.setattr("harness.runtimes.get_runtime",
                        lambda name, docker_host=None: FakeRuntime(behave))
    matrix = write_matrix(tmp_path, (1, 2, 3, 4))
    assert main(["sweep", str(matrix), "--explain", "-q", "--out", str(tmp_path / "r")]) == 1
    out = capsys.readouterr().out
    assert "first bad: v3 (last good: v2)" in out and "where, v3.cpu.s (first bad):" in out
    [run] = list((tmp_path / "r" / "prov").iterdir())
    assert "**Where** (v3.cpu.s, first bad" in (run / "report.md").read_text()
    return run


def test_a_where_is_not_shown_once_its_cells_ran_again(
        explained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the first bad image's pin changed (v3 now good), the sweep resumed
    write_matrix(tmp_path, (1, 2, 1, 4))
    assert main(["sweep", str(tmp_path / "m.yaml"), "-q", "--resume", str(explained)]) == 1
    out = capsys.readouterr().out
    # THEN the answer moved, and no report shows the old where beside the new cells
    assert "first bad: v4 (last good: v3)" in out, out
    md, html = ((explained / name).read_text() for name in ("report.md", "report.html"))
    assert "v3.cpu.s, first bad" not in md and "where, v3.cpu.s" not in out
    assert not re.search(r"v3\.cpu\.s[^<]{0,80}first bad", html)
    # AND they say it is stale and which command refreshes it, which then works
    note = f"stale: the cells changed since; `harness explain {explained}` refreshes it"
    assert note in out, out
    assert f"**Where**: {note}" in md, md
    assert main(["explain", str(explained), "-q"]) == 0
    capsys.readouterr()
    assert main(["report", str(explained)]) == 1
    out = capsys.readouterr().out
    assert "where, v4.cpu.s (first bad):" in out and "stale" not in out, out


def test_an_unreadable_first_bad_is_not_explained(
        explained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the first bad cell's result.json cut short after the sweep
    path = explained / "cells" / "v3.cpu.s" / "result.json"
    path.write_bytes(path.read_bytes()[:200])
    # WHEN the directory is reported
    main(["report", str(explained)])
    out = capsys.readouterr().out
    # THEN the row says the first bad is v3 or later, and no where is printed for v3
    assert "v3 unreadable: first bad is v3 or later" in out, out
    assert "where, v3.cpu.s" not in out and "first bad):" not in out, out
    # AND a partial report, where one is written, does not explain it either
    main(["report", str(explained), "--force"])
    assert "v3.cpu.s, first bad" not in (explained / "report.md").read_text()


def test_compare_names_the_edit_between_two_runs_not_noise(
        explained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a second sweep after the first bad image's pin changed (found by the model
    # of users' paths, tests/model: compare called the difference noise)
    write_matrix(tmp_path, (1, 2, 1, 4))
    assert main(["sweep", str(tmp_path / "m.yaml"), "-q", "--out", str(tmp_path / "r")]) == 1
    [second] = [p for p in (tmp_path / "r" / "prov").iterdir() if p != explained]
    capsys.readouterr()
    # WHEN the two runs are compared
    assert main(["compare", str(explained), str(second)]) == 1
    out = capsys.readouterr().out
    # THEN the difference is the edit, in words, and not a call to re-run for noise
    assert ("s leaks with v3 in " in out and "the runs differ in what they ran (pins "
            "changed (demo==3 -> demo==1))" in out), out
    assert "noise" not in out, out


def test_a_comparison_is_not_kept_beside_a_new_baseline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN v2 (demo 2) peaking 2x above v1 (demo 1): a regression against it
    def peaks(cell: Cell) -> Behaviour:
        [pin] = cell.image.pip
        return Behaviour(base_bytes=400e6 if pin == "demo==2" else 200e6)

    monkeypatch.setattr("harness.runtimes.get_runtime",
                        lambda name, docker_host=None: FakeRuntime(peaks))
    matrix = write_matrix(tmp_path, (1, 2))
    assert main(["sweep", str(matrix), "-q", "--out", str(tmp_path / "r")]) == 1
    assert "first bad: v2 (last good: v1)" in capsys.readouterr().out
    [run] = list((tmp_path / "r" / "prov").iterdir())
    # WHEN the baseline's pin changes to v2's (the same peak) and the sweep resumes
    write_matrix(tmp_path, (2, 2))
    code = main(["sweep", str(matrix), "--resume", str(run), "--out", str(tmp_path / "r")])
    captured = capsys.readouterr()
    # THEN v2's comparison is made again against the new baseline run: no regression
    assert code == 0 and "no bad image" in captured.out, captured.out
    assert "v2.cpu.s: its row baseline v1.cpu.s runs again; running it again" in \
        captured.err, captured.err


def test_an_unreadable_cell_named_to_explain_is_said_to_be_unreadable(
        explained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the first bad cell's result.json cut short (found by the model of users'
    # paths: explain said "no cell 'v3.cpu.s' in this directory; did you mean v4?")
    path = explained / "cells" / "v3.cpu.s" / "result.json"
    path.write_bytes(path.read_bytes()[:200])
    # WHEN it is named to explain
    assert main(["explain", str(explained), "v3.cpu.s", "-q"]) == 2
    err = capsys.readouterr().err
    # THEN it is said to be unreadable, not absent, and nothing is explained
    assert "cell 'v3.cpu.s' is unreadable here" in err and "did you mean" not in err, err


def test_compare_of_a_run_and_its_redecided_copy_names_no_noise(
        explained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the run decided again with floors no leak reaches, written beside it (found
    # by the model of users' paths: compare called the difference noise between runs)
    main(["report", str(explained), "--reanalyze", "--write", "--set",
          "analysis.leak-floor-bytes=1000000000000", "--set",
          "analysis.heap_floor_bytes=1000000000000", "--set",
          "analysis.live_floor_bytes=1000000000000"])
    copy = explained.with_name(explained.name + "-reanalyzed")
    capsys.readouterr()
    # WHEN the two are compared
    assert main(["compare", str(explained), str(copy)]) == 1
    out = capsys.readouterr().out
    # THEN it says one run was decided twice
    assert "s leaks with v3 and v4 in " in out and "one run decided twice" in out, out
    assert "noise" not in out, out


def test_an_image_inserted_before_a_resume_is_shown_in_the_matrixs_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a sweep of a (demo 1) and c (demo 3, bad)
    monkeypatch.setattr("harness.runtimes.get_runtime",
                        lambda name, docker_host=None: FakeRuntime(behave))
    (tmp_path / "s.py").write_text(SCENARIO)
    matrix = tmp_path / "m.yaml"

    def images(*pins: tuple[str, int]) -> None:
        listed = ", ".join(f"{{name: {n}, pip: [demo=={p}]}}" for n, p in pins)
        matrix.write_text("name: order\nruntime: local\n"
                          "defaults: {iterations: 300, warmup: 10, sample_every: 5}\n"
                          f"matrix:\n  image: [{listed}]\n  gpu: [none]\n  scenario: [s.py]\n")

    images(("a", 1), ("c", 3))
    assert main(["sweep", str(matrix), "-q", "--out", str(tmp_path / "r")]) == 1
    [run] = list((tmp_path / "r" / "order").iterdir())
    capsys.readouterr()
    # WHEN z (demo 3, bad too) is put between them and the sweep resumed
    images(("a", 1), ("z", 3), ("c", 3))
    assert main(["sweep", str(matrix), "-q", "--resume", str(run), "--width", "200"]) == 1
    out = capsys.readouterr().out
    # THEN the table's columns and the first bad follow the matrix (a reused cell's
    # result had the place its image had in the run it was made in, after a: z was
    # put after c, and c named first bad)
    header = next(line for line in out.splitlines() if line.startswith("row "))
    assert header.split()[1:4] == ["a", "z", "c"], out
    assert "first bad: z (last good: a)" in out, out
    assert main(["report", str(run), "--width", "200"]) == 1
    reported = capsys.readouterr().out
    assert next(line for line in reported.splitlines() if line.startswith("row ")) == header
    assert "first bad: z (last good: a)" in reported, reported
    # AND a directory resumed before reused results took their new places (c's result
    # still at index 1, z's at 1) is answered by its plan's places
    stale = run / "cells" / "c.cpu.s" / "result.json"
    stale.write_text(stale.read_text().replace('"index": 2', '"index": 1'))
    assert '"index": 1' in stale.read_text()
    assert main(["report", str(run), "--width", "200"]) == 1
    assert "first bad: z (last good: a)" in capsys.readouterr().out
