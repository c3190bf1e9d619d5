"""Issue 42 item 8: what a person reads, tried as a new user would, through
`harness.cli.main`: every command takes -q; `report --format` exits as `report` does."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fakeruntime import Behaviour
from sweepkit import FakeSweep

from harness.cli import COMMANDS, build_parser, main
from harness.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EXIT_REGRESSION

LEAK = Behaviour(leak_per_iter=4096.0)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def leaky(fake_sweep: FakeSweep) -> Path:
    """A finished sweep of two images, the second leaking: its run directory."""
    return fake_sweep(["v1", "v2"], {"v2": LEAK}, plan=True, report=True).root


def test_every_command_takes_q(leaky: Path, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN each command that runs no cell, as a user runs it here (no engine)
    work = leaky.parent.parent.parent
    other = shutil.copytree(leaky, tmp_path / "other")
    runs = {"report": ["report", str(leaky)], "history": ["history", str(leaky.parent)],
            "compare": ["compare", str(leaky), str(other)],
            "doctor": ["doctor", str(work / "m.yaml")], "images": ["images", "list"],
            "sweep": ["sweep", str(work / "m.yaml"), "--list"]}
    for command, args in runs.items():
        # WHEN it is given -q
        code = main([*args, "-q"])
        err = capsys.readouterr().err
        # THEN it is not refused as an unknown flag
        assert "unrecognized arguments" not in err and code != EXIT_BAD_INPUT, (command, err)
    # ... and the commands that run cells parse it too
    parsed = {"explain": [str(leaky)], "culprit": [str(leaky)],
              "bisect": ["m.yaml", "--good", "a", "--bad", "b"],
              "fit": ["m.yaml", "--param", "batch=1..4"],
              "watch": ["repo", "--baseline", "1", "--matrix", "m.yaml"],
              "day": [str(leaky)]}
    assert set(runs) | set(parsed) == set(COMMANDS)
    for command, args in parsed.items():
        _, extra = build_parser(command).parse_known_args([command, *args, "-q"])
        assert extra == [], (command, extra)


def test_q_leaves_out_what_it_says(leaky: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # report --issue: the draft on stdout, the `written:` line only without -q
    main(["report", str(leaky), "--issue", "gpu0.loop"])
    assert "written:" in capsys.readouterr().err
    main(["report", str(leaky), "--issue", "gpu0.loop", "-q"])
    out, err = capsys.readouterr()
    assert "written:" not in err and out
    # history: the table, and no `written:` line with -q
    main(["history", str(leaky.parent)])
    assert "written:" in capsys.readouterr().out
    main(["history", str(leaky.parent), "-q"])
    assert "written:" not in capsys.readouterr().out


@pytest.mark.parametrize("fmt", ["console", "md", "html", "junit", "json"])
def test_report_format_exits_as_report_does(leaky: Path, fmt: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a run with a leak: `harness report DIR` exits 1
    assert main(["report", str(leaky)]) == EXIT_REGRESSION
    capsys.readouterr()
    # WHEN one rendering is asked for
    code = main(["report", str(leaky), "--format", fmt])
    # THEN it exits the same way: a CI step keeping report.md still fails on the leak
    assert code == EXIT_REGRESSION and capsys.readouterr().out


def test_an_image_is_labelled_by_more_than_a_tag_that_says_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN Docker images whose tags say nothing alone, or say the same thing
    (tmp_path / "s.py").write_text("def setup(params):\n    return None\n\n\n"
                                   "def step(state):\n    pass\n")
    (tmp_path / "m.yaml").write_text(
        "name: labels\nruntime: docker\nmatrix:\n  image: [harness-test/nope:1, "
        "python:latest, team/a:2.0, team/b:2.0, nvcr.io/nvidia/tensorflow:22.12-tf1-py3]\n"
        "  gpu: [none]\n  scenario: [s.py]\n")
    # WHEN the cells are listed
    assert main(["sweep", str(tmp_path / "m.yaml"), "--list"]) == 0
    ids = capsys.readouterr().out.split()
    # THEN each image reads as itself: the repository's name where the tag alone would
    # be a bare number, a moving tag, or another image's tag
    assert [i.split(".cpu.")[0] for i in ids] == [
        "nope-1", "python-latest", "a-2.0", "b-2.0", "22.12-tf1-py3"], ids


def test_the_legends_explain_only_what_the_grid_shows(
        fake_sweep: FakeSweep, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN 8 images x 4 rows, the last four images leaking: a grid at 40 columns
    images = [f"v{i}" for i in range(1, 9)]
    run = fake_sweep(images, {f"v{i}": LEAK for i in range(5, 9)},
                     scenarios=("a.py", "b.py", "c.py", "d.py"), plan=True, report=True).root
    capsys.readouterr()
    main(["report", str(run), "--width", "40"])
    out = capsys.readouterr().out
    legend = out[out.index("legend:"):out.index("\n\n", out.index("legend:"))]
    # THEN the console legend names the leak's KiB/call, and no ratio the grid lacks
    assert "L leak" in legend and "KiB/call (L)" in legend, legend
    assert "ratio" not in legend and "late/early" not in legend and "crash" not in legend
    # ... and report.html's legend has the colours its heatmap shows, no others
    page = (run / "report.html").read_text()
    shown = page[page.index('<div class="legend">'):page.index("</div>",
                                                                page.index('class="legend"'))]
    assert "leak" in shown and "ok" in shown and "first bad" in shown
    assert "crash" not in shown and "oom" not in shown and "not run" not in shown, shown


def test_a_clean_grid_has_no_figures_to_explain(fake_sweep: FakeSweep,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    run = fake_sweep([f"v{i}" for i in range(1, 9)], None,
                     scenarios=("a.py", "b.py", "c.py", "d.py"), plan=True, report=True).root
    capsys.readouterr()
    main(["report", str(run), "--width", "40"])
    out = capsys.readouterr().out
    assert "legend:" in out and "figures" not in out and "first bad" not in out, out


SCENARIO = "def setup(params):\n    return None\n\n\ndef step(state):\n    pass\n"
IMAGE = "{name: a, python: python3}"
# A matrix mistake, the key it names, and how its fix line is applied to the text.
MISTAKES = {
    "bad name": (f"name: 'a b/c'\nruntime: local\nmatrix: {{image: [{IMAGE}], scenario: "
                 "[s.py]}\n", "name: 'a b/c'"),
    "bad image name": ("name: x\nruntime: local\nmatrix: {image: [{name: 'v 1', python: "
                       "python3}], scenario: [s.py]}\n", "{name: 'v 1'"),
    "bad id": (f"name: x\nruntime: local\nmatrix: {{image: [{IMAGE}], scenario: [{{script: "
               "s.py, id: 'my run'}]}\n", "id: 'my run'"),
    "params as a list": (f"name: x\nruntime: local\nmatrix: {{image: [{IMAGE}], scenario: "
                         "[{script: s.py, params: [1, 2]}]}\n", None),
    "a top-level string": ("'just a string'\n", None),
    "a top-level list": ("- a\n- b\n", None),
}


@pytest.mark.parametrize("case", sorted(MISTAKES))
def test_every_matrix_mistake_has_a_fix_line(tmp_path: Path, case: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    text, bad = MISTAKES[case]
    (tmp_path / "s.py").write_text(SCENARIO)
    path = tmp_path / "m.yaml"
    path.write_text(text)
    # WHEN the matrix is used
    assert main(["sweep", str(path), "--list"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    # THEN the error says how to fix it ...
    fix = [ln.strip() for ln in err.splitlines() if ln.strip().startswith("fix: ")]
    assert len(fix) == 1, err
    if bad is not None:
        # ... and where the fix is a value to write, written in, the matrix loads
        key, _, value = fix[0].removeprefix("fix: ").partition(": ")
        assert bad.lstrip("{").startswith(key), (bad, fix)
        path.write_text(text.replace(bad, bad[:bad.index(key)] + f"{key}: {value}"))
        assert main(["sweep", str(path), "--list"]) == 0, capsys.readouterr().err


def test_a_directory_given_as_the_matrix_names_the_files_in_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "s.py").write_text(SCENARIO)
    (tmp_path / "m.yaml").write_text(
        f"name: x\nruntime: local\nmatrix: {{image: [{IMAGE}], scenario: [s.py]}}\n")
    (tmp_path / "sub.yaml").mkdir()     # a folder named like a matrix is not offered
    assert main(["sweep", str(tmp_path), "--list"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "is a directory, not a matrix file" in err and "Errno" not in err, err
    (fix,) = [ln for ln in err.splitlines() if "fix: " in ln]
    offered = fix.rsplit("one of ", 1)[1].split(", ")
    assert offered == [str(tmp_path / "m.yaml")], fix
    assert main(["sweep", offered[0], "--list"]) == 0


@pytest.mark.parametrize("argv", [["--help"], ["sweep", "--help"], ["--version"]])
def test_help_to_a_full_stdout_says_the_help_was_lost(argv: list[str]) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    # WHEN the help cannot be written
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "harness", *argv], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120, check=False,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    # THEN it says so, of the help (no results directory), and does not exit 0
    assert proc.stderr.strip() == ("harness: stdout could not be written (No space left on "
                                   "device); the help was not printed (exit 3)"), proc.stderr
    assert proc.returncode == EXIT_ENVIRONMENT


def test_report_md_shows_python_names_as_code_not_entities(
        fake_sweep: FakeSweep, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a cell whose words name a function Python calls `step.<locals>.<genexpr>`,
    # and one whose error carries raw HTML
    run = fake_sweep(["v1", "v2"], {
        "v1": Behaviour(error="raised in step.<locals>.<genexpr>, at <module>"),
        "v2": Behaviour(error="a <script>alert(1)</script>")}, plan=True, report=True).root
    capsys.readouterr()
    main(["report", str(run), "--format", "md"])
    out = capsys.readouterr().out
    # THEN the Python names read as code, as on the terminal and on GitHub ...
    assert "`step.<locals>.<genexpr>`, at `<module>`" in out, out
    assert "&lt;locals" not in out and "&lt;module" not in out
    # ... and HTML stays inert
    assert "<script>" not in out and "&lt;script>" in out


def test_the_table_never_breaks_a_word_at_any_width(
        fake_sweep: FakeSweep, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN two rows, one with a long name, and the answers' long words
    run = fake_sweep(["multidict-6.4.4", "multidict-6.5.1"], {"multidict-6.5.1": LEAK},
                     scenarios=("leak.py", {"script": "leak.py", "id": "leak_with_a_long_name"}),
                     gpus=None, plan=True, report=True).root
    capsys.readouterr()
    for width in range(60, 161, 5):
        # WHEN the table is drawn that wide
        main(["report", str(run), "--width", str(width)])
        out = capsys.readouterr().out
        table = out[:out.index("\n\n")]
        tokens = set(table.split())
        # THEN no line is wider, and the row names, the header and the answers' words
        # are whole: wrapped between words, never cut inside one
        assert max(len(line) for line in table.splitlines()) <= width, table
        if "─" not in table:
            continue    # the grid of symbols: its row names are elided with "…" on purpose
        for name in ("cpu.leak", "cpu.leak_with_a_long_name"):
            assert name in tokens, (width, table)
        if table.startswith("row"):     # images across, the answers in the last column
            words = "first bad / last good bad: multidict-6.5.1 (last good: multidict-6.4.4)"
            assert set(words.split()) <= tokens, (width, table)
