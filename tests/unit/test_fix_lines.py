"""Issue 35 item 4: every fix line works. Each suggested command is run in the situation
that printed it, and harness accepts it (never the exit 2 of a command it refuses)."""

from __future__ import annotations

import errno
import os
import re
import shlex
from pathlib import Path

import pytest
from fakeruntime import Behaviour, FakeRuntime

from harness.cli import main
from harness.matrixfile.model import Cell

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = "def setup(params):\n    return None\n\n\ndef step(state):\n    pass\n"
LEAKS = {"v2", "v3"}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeRuntime:
    """The CLI's runtime: v2 and v3 leak."""
    def behave(cell: Cell) -> Behaviour:
        return Behaviour(leak_per_iter=4096.0 if cell.image.label in LEAKS else 0.0)

    runtime = FakeRuntime(behave)
    monkeypatch.setattr("harness.runtimes.get_runtime",
                        lambda name, docker_host=None: runtime)
    return runtime


def swept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> Path:
    """m.yaml in tmp_path/work, swept from there into reports/; the run directory."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "s.py").write_text(SCENARIO)
    (work / "m.yaml").write_text(
        "name: seam\nruntime: local\n"
        "defaults: {iterations: 200, warmup: 10, sample_every: 5, repeats: 0, rounds: 0}\n"
        "matrix:\n  image: [{name: v1}, {name: v2}, {name: v3}]\n  scenario: [s.py]\n")
    monkeypatch.chdir(work)
    assert main(["sweep", "m.yaml", "-q", *extra]) == 1
    (run,) = (work / "reports" / "seam").iterdir()
    return run


def fix_of(text: str) -> list[str]:
    """The argv of the `fix:` line's `harness ...` command."""
    line = next(ln for ln in text.splitlines() if "fix: harness " in ln)
    command = re.search(r"fix: (harness .*?)(?: runs | prints |$)", line)
    assert command is not None, line
    return shlex.split(command.group(1))[1:]


def test_explains_fix_for_a_changed_cell_resumes_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeRuntime,
        capsys: pytest.CaptureFixture[str]) -> None:
    run = swept(tmp_path, monkeypatch)
    capsys.readouterr()
    # GIVEN the scenario edited since the sweep: its cells no longer answer for it
    (tmp_path / "work" / "s.py").write_text(SCENARIO + "\n# edited\n")
    # WHEN explain is asked for the matrix's newest run
    code = main(["explain", "reports/seam", "-q"])
    err = capsys.readouterr().err
    # THEN nothing is explained (exit 4, which its --help lists), with a fix line ...
    assert code == 4 and "not explained" in err, err
    fix = fix_of(err)
    assert fix[:3] == ["sweep", "m.yaml", "--resume"] and Path(fix[3]) == run.relative_to(
        tmp_path / "work")
    # ... that harness accepts: the run's cells again (a leak: exit 1), then explain works
    assert main([*fix, "-q"]) == 1
    assert main(["explain", "reports/seam", "-q"]) == 0, capsys.readouterr().err


def test_explain_help_lists_every_exit_code_it_gives(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--help"]) == 0
    text = capsys.readouterr().out
    for code in (0, 2, 3, 4, 130):
        assert re.search(rf"\b{code} ", text.split("exit codes:")[1]), code


def test_explain_works_from_another_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeRuntime,
        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a run swept with a relative matrix path, and a user elsewhere
    run = swept(tmp_path, monkeypatch)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    # THEN explain finds the matrix (the run's copy, scenarios beside the original)
    code = main(["explain", str(run), "-q"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "v2.cpu.s" in captured.out


def test_explain_from_another_directory_reads_an_older_runs_relative_matrix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeRuntime,
        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a run whose plan.json names its matrix relative to where it ran (before 35)
    run = swept(tmp_path, monkeypatch)
    plan = run / "plan.json"
    plan.write_text(plan.read_text().replace(str(tmp_path / "work" / "m.yaml"), "m.yaml"))
    assert '"m.yaml"' in plan.read_text()
    monkeypatch.chdir(tmp_path)
    assert main(["explain", str(run), "-q"]) == 0, capsys.readouterr().err


def test_an_iterations_override_is_not_a_changed_setting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeRuntime,
        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a sweep run with --iterations on the command line
    swept(tmp_path, monkeypatch, "--iterations", "300")
    capsys.readouterr()
    # THEN explain explains it: the run's length is how it was asked for
    code = main(["explain", "reports/seam", "-q"])
    err = capsys.readouterr().err
    assert code == 0 and "not explained" not in err, err


@pytest.mark.parametrize(("argv", "kept"), [(["report", "DIR"], 1),   # --format: as report
                                            (["history", "reports/seam"], 1)])
def test_a_read_only_directory_gets_a_fix_the_command_accepts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeRuntime,
        capsys: pytest.CaptureFixture[str], argv: list[str], kept: int) -> None:
    run = swept(tmp_path, monkeypatch)
    capsys.readouterr()
    argv = [str(run) if a == "DIR" else a for a in argv]
    (run / "report.md").write_text("rendered by an older harness\n")  # else none is written

    # GIVEN a file system that refuses every write (as root, chmod would not)
    def refuse(src: object, dst: object) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr("os.replace", refuse)
    # WHEN the command writes its reports there
    code = main(argv)
    err = capsys.readouterr().err
    # THEN it says so (exit 3) with a fix that is no flag it lacks ...
    assert code == 3 and "Read-only file system" in err, err
    assert "--out" not in err
    # ... and the fix runs: the answer, printed, with the answer's exit code
    assert main(fix_of(err)) == kept
    assert "v2" in capsys.readouterr().out


def test_report_of_a_matrix_file_points_at_its_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeRuntime,
        capsys: pytest.CaptureFixture[str]) -> None:
    run = swept(tmp_path, monkeypatch)
    capsys.readouterr()
    # WHEN report is given the matrix file, or a file inside the run directory
    for given in ("m.yaml", str(run / "report.md")):
        assert main(["report", given]) == 2
        err = capsys.readouterr().err
        # THEN the command it suggests reads the run (the leak: exit 1), not exit 2
        fix = shlex.split(err.rsplit(": harness ", 1)[1])
        assert main(fix) == 1, (given, fix)
        capsys.readouterr()


def test_reports_fix_for_missing_cells_works_from_another_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeRuntime,
        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a run that lost a cell, read from another directory
    run = swept(tmp_path, monkeypatch)
    (run / "cells" / "v3.cpu.s" / "result.json").unlink()
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["report", str(run)]) == 1     # v2 leaks; v3 is named missing
    fix = fix_of(capsys.readouterr().out)
    # THEN its fix line resumes the run from here
    assert fix[0] == "sweep" and Path(fix[1]).resolve() == tmp_path / "work" / "m.yaml"
    assert "--resume" in fix
    assert main([*fix, "-q"]) == 1
    assert (run / "cells" / "v3.cpu.s" / "result.json").is_file()


def test_a_missing_test_image_is_built_only_where_a_recipe_makes_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import docker.errors

    from harness.devtools import load_recipes
    from harness.runtimes.dockerengine import pull_failure

    monkeypatch.chdir(ROOT)
    gone = docker.errors.APIError("pull access denied, repository does not exist")
    # GIVEN a test image a recipe builds: its fix names that recipe, which exists
    text = pull_failure("harness-test/tf-cpu:2.12.0", gone)
    name = re.search(r"`harness images build (\S+)`", text)
    assert name is not None, text
    assert name.group(1) in load_recipes(ROOT / "images" / "images.yaml")
    # AND one no recipe builds is never sent to `harness images build`
    assert "images build" not in pull_failure("harness-test/tf-cpu:9.9", gone)


def test_images_named_by_a_fix_line_are_found_from_any_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a user in a project directory of their own (no images/images.yaml here)
    monkeypatch.chdir(tmp_path)
    # WHEN they list the recipes a missing test image's fix line sends them to
    code = main(["images", "list"])
    # THEN harness reads its own recipes, so `harness images build NAME` can work here
    assert code == 0, capsys.readouterr().err
    listed = capsys.readouterr().out
    assert "tf-2.12: harness-test/tf-cpu:2.12.0" in listed, listed


def test_doctors_fix_for_a_missing_image_says_docker_pull_once(tmp_path: Path) -> None:
    import docker.errors
    from test_gpu import ENGINE_INFO, NGC, RTX_3090, FakeEngine, host_with, ngc_matrix

    from harness.cli import doctor
    from harness.runtimes.dockerengine import pull_failure

    engine = FakeEngine(ENGINE_INFO, {})
    # the engine's answer, as the docker runtime gives it
    engine.pullable = lambda ref, *a: pull_failure(  # type: ignore[method-assign]
        ref, docker.errors.APIError("manifest unknown"))
    checks = doctor.diagnose(ngc_matrix(tmp_path), {"local": None}, lambda url: engine,
                             host_with(RTX_3090), has_gpu=True, hook_found=False)
    fixes = [ln for ln in checks.lines if f"{NGC}:20.12-tf1-py3 is not on the engine" in ln]
    assert fixes, checks.lines
    fix = fixes[0].split("fix: ", 1)[1]
    assert fix.count("docker pull") == 1 and "((" not in fix and "(check" not in fix, fix


def test_an_unreadable_results_fix_runs_the_cell_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeRuntime,
        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a run whose cell's result.json was cut short, read from another directory
    run = swept(tmp_path, monkeypatch)
    result = run / "cells" / "v1.cpu.s" / "result.json"
    result.write_text(result.read_text()[:200])
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    main(["report", str(run)])
    said = capsys.readouterr()
    # THEN its fix line (a full command, no MATRIX to fill in) runs the cell again
    fix = fix_of(said.out + said.err)
    assert "MATRIX" not in fix and fix[0] == "sweep", fix
    assert main([*fix, "-q"]) == 1
    assert main(["report", str(run)]) == 1 and result.read_text().rstrip().endswith("}")
