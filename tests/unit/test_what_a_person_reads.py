"""Issue 42 item 8: what a person reads, tried as a new user would, through
`harness.cli.main`: every command takes -q; `report --format` exits as `report` does."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fakeruntime import Behaviour
from sweepkit import FakeSweep

from harness.cli import COMMANDS, build_parser, main
from harness.errors import EXIT_BAD_INPUT, EXIT_REGRESSION

LEAK = Behaviour(leak_per_iter=4096.0)


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
              "watch": ["repo", "--baseline", "1", "--matrix", "m.yaml"]}
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
