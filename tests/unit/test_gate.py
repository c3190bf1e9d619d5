"""Issue 42's reproductions: every command reads cells through one gate
(`harness.store.gate`), answers only from current cells, and names every other one with
a command that works (each printed fix line here is run)."""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from fakeruntime import Behaviour, FakeRuntime
from sweepkit import FakeSweep, on_the_cli, swept, write_matrix

from harness.cli import main
from harness.matrixfile.model import Cell
from harness.store.gate import CURRENT, MISSING, STALE, UNREADABLE, gate
from harness.store.runs import started_of

GOOD = {"multidict": "6.4.4", "msgpack": "1.0.8", "idna": "3.6", "attrs": "23.2.0",
        "six": "1.16.0"}
BAD = {"multidict": "6.5.1", "msgpack": "1.1.0", "idna": "3.10", "attrs": "25.3.0",
       "six": "1.17.0"}


def pins(d: dict[str, str]) -> list[str]:
    return [f"{k}=={v}" for k, v in d.items()]


def fix_of(text: str) -> list[str]:
    """The command of the last `fix:` line in `text`, as main's argv."""
    ends = r"(?: runs| searches| refreshes| starts|, then|;|$)"
    found = re.findall(r"fix: `?(harness [^`\n]*?)`?" + ends, text, re.M)
    assert found, text
    return shlex.split(found[-1])[1:]


def said(capsys: pytest.CaptureFixture[str]) -> str:
    got = capsys.readouterr()
    return got.out + got.err


def two_images(tmp: Path) -> Path:
    return write_matrix(tmp, [{"name": "a", "python": "python3", "pip": pins(GOOD)},
                              {"name": "b", "python": "python3", "pip": pins(BAD)}],
                        name="cul", gpus=["none"])


def cli(monkeypatch: pytest.MonkeyPatch, leak: Callable[[Cell], bool]) -> list[FakeRuntime]:
    made: list[FakeRuntime] = []

    def get_runtime(name: str, docker_host: str | None = None) -> FakeRuntime:
        made.append(FakeRuntime(lambda c: Behaviour(leak_per_iter=6000) if leak(c)
                                else Behaviour(), pins_as_packages=True))
        return made[-1]

    monkeypatch.setattr("harness.runtimes.get_runtime", get_runtime)
    return made


def only_run(base: Path) -> Path:
    (run,) = [p for p in base.iterdir() if p.is_dir()]
    return run


def swept_pair(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[FakeRuntime], Path]:
    """Images a (good) and b (multidict 6.5.1, leaks) swept once through the CLI into
    tmp/r: the runtimes made and the run's directory."""
    made = cli(monkeypatch, lambda c: "multidict==6.5.1" in c.image.pip)
    out = tmp / "r"
    assert main(["sweep", str(two_images(tmp)), "--out", str(out), "-q"]) == 1
    return made, only_run(out / "cul")


# ------------------------------------------------------------------ item 1
def test_culprit_never_searches_from_cells_an_edited_scenario_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 42 item 1: the scenario edited after the sweep, no --resume: culprit says
    G and B are stale and runs nothing; its fix line runs them again, then culprit
    answers."""
    made, run = swept_pair(tmp_path, monkeypatch)
    (tmp_path / "loop.py").write_text("def setup(params):\n    return []\n\n\n"
                                      "def step(state):\n    pass\n")
    capsys.readouterr()
    before = len(made)
    assert main(["culprit", str(run), "-q"]) == 4
    text = said(capsys)
    assert "cause:" not in text and "Workaround" not in text
    assert "stale" in text and "scenario file changed since it ran" in text
    assert all(rt.runs == [] for rt in made[before:])
    assert main(fix_of(text)) == 1                  # the fix line runs the cells again
    capsys.readouterr()
    assert main(["culprit", str(run), "-q"]) == 1
    assert "cause: multidict 6.4.4 -> 6.5.1" in said(capsys)


# ------------------------------------------------------------------ item 2
def sharing_a_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """a.yaml (a leaky row) and b.yaml (a calm one), both `name: team-suite`, on the CLI's
    fake runtime; and the reports folder their runs share."""
    on_the_cli(monkeypatch, lambda c: Behaviour(leak_per_iter=16384)
               if c.scenario.script.name == "leaky.py" else Behaviour())
    a = write_matrix(tmp_path, ["v1", "v2"], ["leaky.py"], name="team-suite", file="a.yaml")
    b = write_matrix(tmp_path, ["v1", "v2"], ["calm.py"], name="team-suite", file="b.yaml")
    return a, b, tmp_path / "reports"


def test_resume_continues_a_run_of_the_same_matrix_file_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 42 item 2: a.yaml and b.yaml share `name:`; `sweep b.yaml --resume` never
    continues a.yaml's run: it names the run it found and refuses with the fix."""
    a, b, out = sharing_a_name(tmp_path, monkeypatch)
    assert main(["sweep", str(a), "--out", str(out), "-q"]) == 1
    run_a = only_run(out / "team-suite")
    capsys.readouterr()
    assert main(["sweep", str(b), "--out", str(out), "-q", "--resume"]) == 2
    text = said(capsys)
    assert str(run_a.name) in text and "a.yaml" in text
    assert main(fix_of(text)) == 0                  # the fix: a new run of b.yaml
    runs = sorted(p for p in (out / "team-suite").iterdir() if p != run_a)
    assert len(runs) == 1
    capsys.readouterr()
    assert main(["report", str(runs[0])]) == 0
    assert "leaky" not in said(capsys)
    assert main(["report", str(run_a)]) == 1
    # and --resume of b.yaml now continues b.yaml's run
    assert main(["sweep", str(b), "--out", str(out), "-q", "--resume"]) == 0
    assert len(list((out / "team-suite").iterdir())) == 2


def test_a_report_reads_only_the_cells_of_its_plan(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A cell on disk that the run's plan lacks (left by another matrix's run resumed
    into it by an older harness) is not the run's."""
    leaky = swept(tmp_path / "x", ["v1", "v2"], {"v2": Behaviour(leak_per_iter=16384)},
                  scenarios=["leaky.py"], plan=True)
    calm = swept(tmp_path / "y", ["v1", "v2"], scenarios=["calm.py"], plan=True)
    src = leaky.root / "cells" / "v2.gpu0.leaky"
    shutil.copytree(src, calm.root / "cells" / src.name)
    assert main(["report", str(calm.root)]) == 0
    assert "leaky" not in said(capsys)


# ------------------------------------------------------------------ item 3
def cut(path: Path) -> None:
    text = path.read_text()
    path.write_text(text[: len(text) // 2])


def test_an_unreadable_cell_never_hides_a_bad_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 42 item 3: v2 and v3 leak; v2's result.json cut in half. explain and
    `report --issue` say the row has a bad cell behind an unreadable one, with the
    command that runs it again (never "no bad cell", never exit 0); that command works."""
    behave = {"v2": Behaviour(leak_per_iter=16384), "v3": Behaviour(leak_per_iter=16384)}
    on_the_cli(monkeypatch, lambda c: behave.get(c.image.label, Behaviour()))
    path = write_matrix(tmp_path, ["v1", "v2", "v3"])
    out = tmp_path / "r"
    assert main(["sweep", str(path), "--out", str(out), "-q"]) == 1
    run = only_run(out / "t")
    cut(run / "cells" / "v2.gpu0.loop" / "result.json")
    capsys.readouterr()
    assert main(["explain", str(run), "-q"]) == 4
    text = said(capsys)
    assert "no row has a bad cell" not in text
    assert "v2 unreadable" in text
    assert main(["report", str(run), "--issue", "gpu0.loop"]) == 2
    issue = said(capsys)
    assert "has no bad cell" not in issue and "unreadable" in issue
    assert main(fix_of(issue)) == 1
    capsys.readouterr()
    assert main(["explain", str(run), "-q"]) == 0
    assert "v2.gpu0.loop" in said(capsys)


# ------------------------------------------------------------------ item 4
def test_compare_names_cells_of_one_side_and_counts_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 42 item 4: NEW has two extra leaking cells: compare names them and exits
    1; an unreadable cell reads "unreadable", never "-", and is counted (exit 4 where
    nothing else is bad)."""
    on_the_cli(monkeypatch, lambda c: Behaviour(leak_per_iter=16384)
               if c.image.label in ("v3", "v4") else Behaviour())
    old = write_matrix(tmp_path / "old", ["v1", "v2"])
    new = write_matrix(tmp_path / "new", ["v1", "v2", "v3", "v4"])
    assert main(["sweep", str(old), "--out", str(tmp_path / "a"), "-q"]) == 0
    assert main(["sweep", str(new), "--out", str(tmp_path / "b"), "-q"]) == 1
    a, b = only_run(tmp_path / "a" / "t"), only_run(tmp_path / "b" / "t")
    capsys.readouterr()
    assert main(["compare", str(a), str(b)]) == 1
    text = said(capsys)
    assert "no differences in verdict" not in text or "in the 2 cells both hold" in text
    assert "v3/loop" in text and "v4/loop" in text and "leak" in text
    cut(a / "cells" / "v2.gpu0.loop" / "result.json")
    shutil.rmtree(b / "cells" / "v3.gpu0.loop")
    shutil.rmtree(b / "cells" / "v4.gpu0.loop")
    assert main(["compare", str(a), str(b)]) == 4
    text = said(capsys)
    assert "unreadable" in text and "not run" in text
    assert not re.search(r"^\s*v2\s+loop\s+-\s", text, re.M)
    assert main(fix_of(text)) == 1      # B's fix: its two cells run again (they leak)
    capsys.readouterr()
    assert main(["compare", str(a), str(b)]) == 1


# ------------------------------------------------------------------ item 5
def test_culprit_on_a_row_with_no_bad_image_and_its_stale_note(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 42 item 5: B edited to be good and resumed: the stale culprit note's fix
    (`harness culprit DIR ROW`) works (exit 0: nothing to search), and the note leaves
    report.md and report.html."""
    _, run = swept_pair(tmp_path, monkeypatch)
    assert main(["culprit", str(run), "-q"]) == 1
    path = write_matrix(tmp_path, [{"name": "a", "python": "python3", "pip": pins(GOOD)},
                                   {"name": "b", "python": "python3",
                                    "pip": pins({**BAD, "multidict": "6.4.4"})}],
                        name="cul", gpus=["none"])
    out = run.parent.parent
    assert main(["sweep", str(path), "--out", str(out), "-q", "--resume", str(run)]) == 0
    md = (run / "report.md").read_text()
    assert "stale: the cells it searched" in md
    capsys.readouterr()
    (command,) = re.findall(r"`(harness culprit [^`]*)` searches them again", md)
    assert main(shlex.split(command)[1:]) == 0
    text = said(capsys)
    assert "has a first bad image" not in text and "no bad image" in text
    assert "stale: the cells it searched" not in (run / "report.md").read_text()
    assert "stale: the cells it searched" not in (run / "report.html").read_text()
    # Issue 63 item 12: the clean directory without ROW exits 0 too, as `culprit DIR
    # ROW`, `explain` and `report` do on it (it was exit 2, as for bad input)
    assert main(["culprit", str(run), "-q"]) == 0
    assert ("no row of this directory has a bad image after a good one: nothing to "
            "search") in said(capsys)
    assert main(["explain", str(run), "-q"]) == 0
    assert main(["report", str(run), "--format", "md"]) == 0


@pytest.mark.parametrize(("flags", "words"), [
    (["--good", "b", "--bad", "a"], "--good b: its cell is leak, not good"),
    (["--good", "a", "--bad", "a"], "--good and --bad name one image"),
    (["--bad", "a"], "--bad a: its cell is ok, not bad"),
    (["--good", "zz", "--bad", "b"], "--good zz: no cell of row cpu.loop"),
])
def test_culprit_refuses_good_and_bad_that_cannot_be_right(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], flags: list[str], words: str) -> None:
    _, run = swept_pair(tmp_path, monkeypatch)
    capsys.readouterr()
    assert main(["culprit", str(run), "cpu.loop", *flags, "-q"]) == 2
    text = said(capsys)
    assert words in text
    assert main(fix_of(text)) == 1


def test_history_and_report_count_missing_cells_alike(
        fake_sweep: FakeSweep, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 42 item 5: one damaged directory; history and report give one figure."""
    on_the_cli(monkeypatch, None)
    run = fake_sweep(["v1", "v2"], scenarios=["loop.py", "other.py"], plan=True)
    root: Path = run.root
    cut(root / "cells" / "v2.gpu0.loop" / "result.json")
    shutil.rmtree(root / "cells" / "v1.gpu0.other")
    capsys.readouterr()
    main(["report", str(root)])
    text = said(capsys)
    rep = re.search(r"(\d+) of (\d+) planned cells missing", text)
    main(["history", str(root.parent)])
    hist = re.search(r"(\d+) of (\d+) planned cells missing", said(capsys))
    assert rep is not None and hist is not None
    assert rep.groups() == hist.groups() == ("2", "4")
    assert main(fix_of(text)) == 0                  # the fix runs the two again
    capsys.readouterr()
    assert main(["report", str(root)]) == 0
    main(["history", str(root.parent), "--no-html"])
    assert "planned cells missing" not in said(capsys)


def test_a_re_decided_copy_keeps_the_time_its_cells_ran(
        fake_sweep: FakeSweep, capsys: pytest.CaptureFixture[str]) -> None:
    run = fake_sweep(["v1", "v2"], {"v2": Behaviour(leak_per_iter=16384)}, plan=True,
                     report=True)
    root: Path = run.root
    assert main(["report", str(root), "--reanalyze", "--write"]) == 1
    (copy,) = [p for p in root.parent.iterdir() if "-reanalyzed" in p.name]
    assert started_of(copy) == started_of(root)


# ------------------------------------------------------------------ the gate
def test_the_gate_names_each_cell_state(fake_sweep: FakeSweep) -> None:
    run = fake_sweep(["v1", "v2", "v3", "v4"], plan=True)
    root: Path = run.root
    cut(root / "cells" / "v2.gpu0.loop" / "result.json")
    shutil.rmtree(root / "cells" / "v3.gpu0.loop")
    first = gate(root)
    assert [first.state(f"{v}.gpu0.loop") for v in ("v1", "v2", "v3", "v4")] == [
        CURRENT, UNREADABLE, MISSING, CURRENT]
    (root.parent.parent.parent / "loop.py").write_text("import os\n" + (
        root.parent.parent.parent / "loop.py").read_text())
    after = gate(root)
    assert after.state("v1.gpu0.loop") == STALE
    assert "scenario file changed" in after.stale["v1.gpu0.loop"]
    assert after.results == {} and "--resume" in after.refresh


def test_a_container_runtime_refuses_a_matrix_of_interpreters(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 42 item 5: `--runtime docker` on `{name, python, pip}` entries said `docker
    pull python3`; it is bad input, and its fix (leave the flag out) works."""
    _, run = swept_pair(tmp_path, monkeypatch)
    capsys.readouterr()
    assert main(["culprit", str(run), "--runtime", "docker", "-q"]) == 2
    text = said(capsys)
    assert "interpreters and pip pins" in text and "docker pull" not in text
    assert "fix: leave out --runtime docker" in text
    assert main(["culprit", str(run), "-q"]) == 1


def test_history_says_when_the_newest_run_is_stale(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    on_the_cli(monkeypatch, lambda c: Behaviour(leak_per_iter=16384)
               if c.image.label == "v2" else Behaviour())
    path = write_matrix(tmp_path, ["v1", "v2"])
    out = tmp_path / "r"
    assert main(["sweep", str(path), "--out", str(out), "-q"]) == 1
    (tmp_path / "loop.py").write_text("import os\n" + (tmp_path / "loop.py").read_text())
    capsys.readouterr()
    main(["history", str(out / "t"), "--no-html"])
    text = said(capsys)
    assert "scenario file changed since it ran" in text
    assert main(fix_of(text)) == 1
    capsys.readouterr()
    main(["history", str(out / "t"), "--no-html"])
    assert "changed since" not in said(capsys)


def test_a_run_resumed_with_another_subset_keeps_both_in_its_plan(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A report reads only its plan's cells: `-k v1`, then `--resume -k v2`, plans both."""
    on_the_cli(monkeypatch, lambda c: Behaviour(leak_per_iter=16384)
               if c.image.label == "v1" else Behaviour())
    path = write_matrix(tmp_path, ["v1", "v2"])
    out = tmp_path / "r"
    assert main(["sweep", str(path), "--out", str(out), "-q", "-k", "v1"]) == 1
    assert main(["sweep", str(path), "--out", str(out), "-q", "-k", "v2", "--resume"]) in (0, 1)
    capsys.readouterr()
    assert main(["report", str(only_run(out / "t"))]) == 1      # v1's leak is still there
    assert "planned cells missing" not in said(capsys)


def test_why_of_a_stale_cell_says_it_is_stale_and_its_fix_runs_it_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`report --why CELL` after the scenario changed: not "no cell is called so" with an
    empty list of cells, but the cell's staleness and the command that runs it again,
    which works; then --why answers."""
    on_the_cli(monkeypatch, lambda c: Behaviour(leak_per_iter=16384)
               if c.image.label == "v2" else Behaviour())
    path = write_matrix(tmp_path, ["v1", "v2"])
    out = tmp_path / "r"
    assert main(["sweep", str(path), "--out", str(out), "-q"]) == 1
    run = only_run(out / "t")
    (tmp_path / "loop.py").write_text("import os\n" + (tmp_path / "loop.py").read_text())
    capsys.readouterr()
    assert main(["report", str(run), "--why", "v2.gpu0.loop"]) == 2
    text = said(capsys)
    assert "v2.gpu0.loop is stale (scenario file changed since it ran)" in text, text
    assert "called so" not in text
    assert main(fix_of(text)) == 1
    capsys.readouterr()
    assert main(["report", str(run), "--why", "v2.gpu0.loop"]) == 1  # as report (issue 63 item 12)
    assert "decided by rule: leak" in said(capsys)


def test_explain_of_a_directory_with_a_damaged_cell_exits_4_as_report_does(
        fake_sweep: FakeSweep, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 50: `explain` said "no row has a bad cell" and exited 0 where a damaged
    result.json may hide the bad cell; report exits 4 on the same directory."""
    on_the_cli(monkeypatch, None)
    run = fake_sweep(["v1", "v2"], plan=True)
    root: Path = run.root
    cut(root / "cells" / "v2.gpu0.loop" / "result.json")
    capsys.readouterr()
    assert main(["report", str(root)]) == 4
    capsys.readouterr()
    assert main(["explain", str(root)]) == 4
    text = said(capsys)
    assert "v2.gpu0.loop" in text and "no row has a bad cell" not in text, text
    assert main(fix_of(text)) == 0                  # the fix runs it again
    capsys.readouterr()
    assert main(["explain", str(root)]) == 0
    assert "no row has a bad cell" in said(capsys)


def test_history_reads_the_runs_of_one_matrix_file_of_a_shared_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 50: a.yaml and b.yaml share `name:`, so their runs land in one reports/NAME;
    history joined them into one table (a.yaml's leaky row beside b.yaml's calm one). It
    reads the newest run's file and names each run it left out, with its file."""
    a, b, out = sharing_a_name(tmp_path, monkeypatch)
    assert main(["sweep", str(a), "--out", str(out), "-q"]) == 1
    assert main(["sweep", str(b), "--out", str(out), "-q"]) == 0
    capsys.readouterr()
    assert main(["history", str(out / "team-suite"), "--no-html"]) == 0
    text = said(capsys)
    assert "calm" in text and "leaky" not in text.replace("a.yaml", ""), text
    assert "left out, a run of" in text and "a.yaml" in text, text


def test_a_directory_whose_matrix_is_gone_is_said_to_be_unchecked(
        fake_sweep: FakeSweep, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 50: where the gate cannot find the matrix the sweep ran (a copied
    directory, a moved file), every cell read as current, silently. report and compare
    now say the cells are unchecked (and still read them as recorded)."""
    on_the_cli(monkeypatch, None)
    run = fake_sweep(["v1", "v2"], plan=True)
    root: Path = run.root
    matrix = next(root.parents[2].glob("*.yaml"))
    matrix.rename(matrix.with_suffix(".moved"))
    capsys.readouterr()
    assert main(["report", str(root)]) == 0
    text = said(capsys)
    assert "not checked against their inputs" in text and matrix.name in text, text
    assert main(["compare", str(root), "--image", "v1", "--image", "v2"]) == 0
    assert "not checked against their inputs" in said(capsys)


def test_compare_of_an_image_whose_cells_are_stale_says_so(
        fake_sweep: FakeSweep, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 51 item 8: `compare --image` on a directory whose cells are all stale said
    "no such image ... (allowed values: , ...)"."""
    on_the_cli(monkeypatch, None)
    run = fake_sweep(["v1", "v2"], plan=True)
    root: Path = run.root
    scenario = root.parents[2] / "loop.py"
    scenario.write_text(scenario.read_text() + "\n# edited\n")
    capsys.readouterr()
    assert main(["compare", str(root), "--image", "v1", "--image", "v2"]) == 2
    text = said(capsys)
    assert "no current cell of it" in text and "stale" in text, text
    assert "allowed values: ," not in text
    assert main(fix_of(text)) == 0                  # the fix runs them again
    capsys.readouterr()
    assert main(["compare", str(root), "--image", "v1", "--image", "v2"]) == 0


def test_a_pin_edited_in_the_matrix_makes_its_cells_stale_for_every_reader(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 50: image b's pin edited in the matrix file (multidict 6.5.1 -> 6.4.4, the
    same image name), no --resume: report, explain, culprit and history each say b's
    cell is stale and answer nothing from it; the fix line runs it again."""
    made, run = swept_pair(tmp_path, monkeypatch)
    (matrix,) = tmp_path.glob("*.yaml")
    text = matrix.read_text()
    assert "multidict==6.5.1" in text
    matrix.write_text(text.replace("multidict==6.5.1", "multidict==6.4.4"))
    capsys.readouterr()
    before = len(made)
    for argv, code in ((["report", str(run)], 4), (["explain", str(run), "-q"], 4),
                       (["culprit", str(run), "-q"], 4),
                       (["history", str(run.parent), "--no-html"], None)):
        got = main(argv)
        out = said(capsys)
        assert "pins changed since it ran" in out, (argv, out)
        assert "leak: heap" not in out and "cause:" not in out, (argv, out)
        if code is not None:
            assert got == code, (argv, got, out)
    assert all(rt.runs == [] for rt in made[before:])
    main(["report", str(run)])
    assert main(fix_of(said(capsys))) == 0          # the fix line runs b again: now good
    capsys.readouterr()
    assert main(["report", str(run)]) == 0
