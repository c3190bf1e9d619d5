"""Issue 28 item 3: the options the running commands share are defined once
(`harness/cli/options.py`) and checked once, by every command that takes them."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from harness.cli import build_parser, main, options

ROOT = Path(__file__).resolve().parents[2]
# Each command that takes a checked option, with the arguments it needs besides.
ARGV = {
    "sweep": ["m.yaml"],
    "bisect": ["m.yaml"],
    "fit": ["m.yaml"],
    "watch": ["localhost:5000/x", "--baseline", "1", "--matrix", "m.yaml"],
    "report": ["some-dir"],
    "compare": ["some-dir", "other-dir"],
    "history": ["some-dir"],
}
BAD = {"iterations": ("0", "-3"), "warmup": ("-1",), "width": ("0", "10")}


def commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    found = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(found.choices)


def flags(p: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {s: a for a in p._actions for s in a.option_strings}


def test_every_command_taking_a_checked_option_is_tried_below() -> None:
    takes = {name for name, p in commands().items()
             if any(f"--{opt}" in flags(p) for opt in BAD)}
    assert takes == set(ARGV)


@pytest.mark.parametrize("option, value", [(o, v) for o, vs in BAD.items() for v in vs])
def test_a_bad_value_is_refused_alike_by_every_command(
        option: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN every command that takes the option (bisect included: it once ran a 0-call cell)
    monkeypatch.chdir(tmp_path)
    said = {}
    for name, rest in ARGV.items():
        if f"--{option}" not in flags(commands()[name]):
            continue
        # WHEN it is given a value no run can use
        code = main([name, *rest, f"--{option}", value])
        # THEN it exits 2 before anything else, with the one message
        err = capsys.readouterr().err
        assert code == 2, (name, err)
        said[name] = err
    assert len(said) >= 2 and len(set(said.values())) == 1, said
    assert next(iter(said.values())).startswith(f"harness: --{option} {value}: ")


def test_bisect_iterations_0_says_what_sweep_says(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "m.yaml", "--iterations", "0"]) == 2
    sweep = capsys.readouterr().err
    assert main(["bisect", "m.yaml", "--iterations", "0"]) == 2
    assert capsys.readouterr().err == sweep
    assert "must be >= 1" in sweep


def test_the_shared_options_read_the_same_in_every_command() -> None:
    # GIVEN each shared option as each command that takes it shows it in --help
    helps: dict[str, set[str]] = {}
    for name, p in commands().items():
        for flag, action in flags(p).items():
            if flag in ("--runtime", "--docker-host", "--iterations", "--warmup", "--width",
                        "--quiet") and name != "doctor":
                helps.setdefault(flag, set()).add(str(action.help).replace("probe", "cell"))
    # THEN one text each (fit says "probe" where the others say "cell")
    assert {f: len(h) for f, h in helps.items()} == dict.fromkeys(helps, 1)
    assert helps["--docker-host"] == {options.DOCKER_HOST_HELP}
    assert len(helps) == 6


def test_docker_host_help_is_written_once() -> None:
    text = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "harness").rglob("*.py"))
    assert text.count('"Docker endpoint (unix://') == 1     # the string, not a docstring


@pytest.mark.parametrize("command", ["sweep", "bisect", "fit", "watch"])
def test_every_command_that_runs_cells_takes_a_budget(command: str) -> None:
    # fit and watch read `getattr(args, "budget", None)`: fit had no --budget (always
    # None) and watch's was never declared, so a user's budget was silently ignored.
    args = build_parser().parse_args([command, *ARGV[command], "--budget", "3s"])
    assert args.budget == "3s"
