"""Never a falsely clean answer (issue 21 points 1 and 2): a results directory that lacks
cells, a cell that cannot be read, undecided cells and runs too short to decide."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import sweepkit
from fakeruntime import Behaviour, FakeRuntime

from harness import matrixfile
from harness.cli import main
from harness.errors import EXIT_UNDECIDED
from harness.report import Report, read_run
from harness.store.results import PLAN_FILE
from harness.sweeping.course import exit_code

HOST_PYTHON = {"name": "a", "python": "python3"}   # a `runtime: local` image: this host
IMAGES = ["v1", "v2", "v3", "v4"]


def leaky(label: str) -> bool:
    return label in ("v2", "v3")


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A whole sweep of four images, v2 and v3 leaking, with its plan as the CLI writes."""
    return sweepkit.swept(tmp_path_factory.mktemp("incomplete"), IMAGES,
                          lambda c: Behaviour(leak_per_iter=16384) if leaky(c.image.label)
                          else Behaviour(), name="inc", plan=True, report=True).root


@pytest.fixture
def rdir(swept: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(swept, tmp_path / "run"))


def digest(root: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.iterdir() if p.is_file()}


def test_the_whole_directory_names_the_first_bad(rdir: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(rdir)]) == 1
    assert "first bad: v2 (last good: v1)" in capsys.readouterr().out


def test_a_missing_first_bad_cell_is_a_gap_not_a_later_first_bad(
        rdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the first bad cell's result deleted (as after an interrupted sweep)
    (rdir / "cells" / "v2.gpu0.loop" / "result.json").unlink()
    before = digest(rdir)
    code = main(["report", str(rdir)])
    out = capsys.readouterr().out
    # THEN v3 is not named first bad: v2 may be it
    assert "first bad: v3" not in out and "last good: v1" not in out
    assert "v2 not run: first bad is v2 or later, up to v3" in out
    assert "1 of 4 planned cells missing" in out and "v2.gpu0.loop" in out
    # AND the complete report already there is not replaced by a partial one
    assert digest(rdir) == before
    assert code == 1          # v3 is bad whatever v2 is


def test_an_interrupted_sweep_is_not_clean(rdir: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN only the first image's cell finished
    for label in IMAGES[1:]:
        shutil.rmtree(rdir / "cells" / f"{label}.gpu0.loop")
    code = main(["report", str(rdir)])
    out = capsys.readouterr().out
    # THEN no "no bad image", the missing cells are named, the exit code is not 0
    assert "no bad image" not in out
    assert "first bad is v2 or later, if any" in out
    assert code == EXIT_UNDECIDED
    assert out.rstrip().splitlines()[-1].startswith("not a complete answer: 3 of 4")


def test_a_cut_short_result_is_named_unreadable(rdir: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = rdir / "cells" / "v2.gpu0.loop" / "result.json"
    path.write_text(path.read_text()[:120])
    main(["report", str(rdir)])
    out = capsys.readouterr().out
    assert "v2 unreadable: first bad is v2 or later" in out
    assert "not a whole result.json" in out
    assert read_run(rdir).unreadable.keys() == {"v2.gpu0.loop"}


def test_undecided_cells_have_their_own_exit_code(rdir: Path) -> None:
    run = read_run(rdir)
    results = {k: r for k, r in run.results.items() if not leaky(r.image.label)}
    import dataclasses
    vague = {k: dataclasses.replace(r, verdict="ambiguous") for k, r in results.items()}
    report = Report.from_results("inc", vague, planned=[p for p in run.planned
                                                         if p.id in vague])
    assert report.undecided_cells == sorted(vague)
    assert exit_code(report) == EXIT_UNDECIDED
    assert report.rows[0].first_bad is None and "or later, if any" in report.rows[0].sentence
    assert "undecided" in (report.incomplete_note() or "")


def test_results_json_lists_missing_and_undecided(rdir: Path) -> None:
    (rdir / "cells" / "v4.gpu0.loop" / "result.json").unlink()
    main(["report", str(rdir), "--format", "json"])
    run = read_run(rdir)
    data = Report.from_results("inc", run.results, planned=run.planned).to_json()
    assert data["missing_cells"] == ["v4.gpu0.loop"]
    assert json.loads((rdir / "results.json").read_text())["missing_cells"] == []


def test_a_run_too_short_to_decide_is_refused_up_front(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweepkit.write_matrix(tmp_path, [HOST_PYTHON], name="short", gpus=None,
                          defaults={"sample_every": 10})
    code = main(["sweep", str(tmp_path / "m.yaml"), "--iterations", "1",
                 "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and not (tmp_path / "out").exists()
    assert "1 measured iteration cannot decide" in err and "--iterations 100" in err


def test_a_rerun_grows_to_a_length_that_can_decide(tmp_path: Path) -> None:
    # GIVEN a cell of 20 iterations sampled every 10: two samples, never enough
    out = sweepkit.swept(tmp_path, ["a"], name="grow", defaults={
        "iterations": 20, "warmup": 5, "sample_every": 10, "repeats": 1})
    attempts = out.results["a.gpu0.loop"].attempts
    # THEN the re-run is long enough for min_samples step samples (10 x 10), not 40
    assert [a.iterations for a in attempts] == [20, 100]
    assert attempts[0].verdict == "ambiguous"


def test_an_interrupted_sweep_gets_a_partial_report_that_says_so(
        rdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN an interrupted sweep's directory: cells missing and no report written yet
    for label in IMAGES[1:]:
        shutil.rmtree(rdir / "cells" / f"{label}.gpu0.loop")
    for name in ("results.json", "report.md", "report.html", "junit.xml"):
        (rdir / name).unlink()
    code = main(["report", str(rdir)])
    out = capsys.readouterr().out
    # THEN the partial report is written, and it names what it lacks
    assert code == EXIT_UNDECIDED
    assert "3 of 4 planned cells missing; partial report written" in out
    data = json.loads((rdir / "results.json").read_text())
    assert data["missing_cells"] == [f"{v}.gpu0.loop" for v in IMAGES[1:]]
    md = (rdir / "report.md").read_text()
    assert "not a complete answer: 3 of 4 planned cells missing" in md
    assert "no bad image" not in md and "first bad is v2 or later, if any" in md
    assert "| v3.gpu0.loop | not run | no result.json" in md
    junit = (rdir / "junit.xml").read_text()
    assert 'errors="3"' in junit and 'type="not run"' in junit
    assert "not run" in (rdir / "report.html").read_text()
    # AND a second report over it (still partial) may rewrite it: nothing whole is lost
    assert main(["report", str(rdir)]) == EXIT_UNDECIDED
    assert "partial report written" in capsys.readouterr().out


def test_a_complete_report_is_replaced_by_a_partial_one_only_with_force(
        rdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (rdir / "cells" / "v4.gpu0.loop" / "result.json").unlink()
    before = digest(rdir)
    main(["report", str(rdir)])
    out = capsys.readouterr().out
    assert "nothing written: the complete report there is not replaced" in out
    assert "--force replaces it" in out and digest(rdir) == before
    # WHEN asked to, with --force
    assert main(["report", str(rdir), "--force"]) == 1
    out = capsys.readouterr().out
    assert "partial report written" in out and "replacing the complete one (--force)" in out
    assert json.loads((rdir / "results.json").read_text())["missing_cells"] == [
        "v4.gpu0.loop"]


def test_force_only_goes_with_writing_reports(rdir: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(rdir), "--force", "--format", "md"]) == 2
    assert "--force goes with a plain `harness report DIR`" in capsys.readouterr().err


def grow_matrix(tmp_path: Path, **defaults: int) -> Path:
    return sweepkit.write_matrix(tmp_path, ["a"], name="grow", defaults=defaults)


def recorded(lost: int = 0) -> tuple[FakeRuntime, list[int]]:
    """A fake runtime whose runs' lengths (agent iterations) are recorded; its first
    `lost` runs end as an engine that went away."""
    from harness.runtimes.base import RunOutcome

    runtime = FakeRuntime(lambda c: Behaviour())
    got: list[int] = []
    run = runtime.run

    def recording(request, progress):  # type: ignore[no-untyped-def]
        got.append(request.cell.settings.agent_iterations)
        if len(got) <= lost:
            return RunOutcome(exit_code=None, error="engine lost (connection reset)")
        return run(request, progress)

    runtime.run = recording  # type: ignore[method-assign]
    return runtime, got


def test_an_early_stop_rerun_grows_its_max_iterations(tmp_path: Path) -> None:
    # GIVEN early-stop mode: the agent runs up to max_iterations (20: two samples)
    matrix = grow_matrix(tmp_path, max_iterations=20, min_iterations=10, warmup=5,
                         sample_every=10, repeats=2)
    runtime, got = recorded()
    res = sweepkit.sweep_matrix(matrix, runtime).results["a.gpu0.loop"]
    # THEN the re-run looks longer (not 20 again), long enough to decide, and decides
    assert got == [20, 100]
    assert [a.iterations for a in res.attempts] == [20, 100]
    assert res.attempts[0].verdict == "ambiguous" and res.verdict == "ok"


def test_an_engine_retry_spends_none_of_the_cells_repeats(tmp_path: Path) -> None:
    """Issue 50: the engine went away in the first run (retried once), and that retry
    counted as one of the cell's `repeats`: with `repeats: 1` the ambiguous second run
    was never run longer."""
    matrix = grow_matrix(tmp_path, max_iterations=20, min_iterations=10, warmup=5,
                         sample_every=10, repeats=1)
    runtime, got = recorded(lost=1)
    res = sweepkit.sweep_matrix(matrix, runtime).results["a.gpu0.loop"]
    # THEN the retry, the ambiguous run and its one longer repeat all ran
    assert got == [20, 20, 100]
    assert [a.verdict for a in res.attempts] == ["crash", "ambiguous", "ok"]
    assert res.verdict == "ok"


def test_a_rerun_that_would_pass_the_timeout_stops_and_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a cell whose 20 calls took 1 s and a 3 s timeout: 100 calls cannot finish
    # (the attempt stage's clock is a fake one that the run moves on by exactly 1 s, so
    # the estimate is the same on a busy machine)
    from harness.stages import context, measure

    now = [1000.0]
    for stage in (measure, context):   # the attempt's clock and the run's
        monkeypatch.setattr(stage, "time", SimpleNamespace(monotonic=lambda: now[0]))
    matrix = grow_matrix(tmp_path, iterations=20, warmup=5, sample_every=10, repeats=2,
                         timeout=3)
    runtime = FakeRuntime(lambda c: Behaviour())
    run = runtime.run

    def slow(request, progress):  # type: ignore[no-untyped-def]
        now[0] += 1.0
        return run(request, progress)

    runtime.run = slow  # type: ignore[method-assign]
    out = sweepkit.sweep_matrix(matrix, runtime)
    res, said = out.results["a.gpu0.loop"], out.said
    assert runtime.runs == ["a.gpu0.loop"] and res.verdict == "ambiguous"
    assert any("not run again: 100 iterations would take about 5 s, past the cell's "
               "timeout (3 s)" in line for line in said), said


def test_an_older_finished_directory_is_checked_against_its_results_json(
        rdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a directory of an older sweep (no plan.json) whose first bad result is gone
    (rdir / PLAN_FILE).unlink()
    (rdir / "cells" / "v2.gpu0.loop" / "result.json").unlink()
    before = digest(rdir)
    assert main(["report", str(rdir)]) == 1
    out = capsys.readouterr().out
    # THEN its results.json (written when that sweep finished) names the missing cell
    assert "first bad: v3" not in out
    assert "v2 not run: first bad is v2 or later, up to v3" in out
    assert "cells checked against its results.json" in out
    assert digest(rdir) == before


def test_an_older_interrupted_directory_is_checked_against_its_matrix(
        rdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN an older sweep interrupted after its first cell: no plan.json, no reports,
    # a copy of the matrix whose scenario path does not resolve from the directory
    (rdir / PLAN_FILE).unlink()
    for name in ("results.json", "report.md", "report.html", "junit.xml"):
        (rdir / name).unlink()
    for label in IMAGES[1:]:
        shutil.rmtree(rdir / "cells" / f"{label}.gpu0.loop")
    assert not (rdir / "loop.py").exists()
    code = main(["report", str(rdir)])
    out = capsys.readouterr().out
    # THEN the matrix's cells the directory lacks are named and the answer is not clean
    assert code == EXIT_UNDECIDED and "no bad image" not in out
    assert "3 of 4 planned cells missing" in out
    assert "cells checked against its matrix.yaml" in out


def test_a_directory_with_nothing_to_check_against_says_so(
        rdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in (PLAN_FILE, "results.json", "matrix.yaml"):
        (rdir / name).unlink()
    assert main(["report", str(rdir)]) == 1
    assert "cells that never ran cannot be named" in capsys.readouterr().out


def test_iterations_bounds_an_early_stop_run_and_is_refused_when_too_short(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN an early-stop matrix (the agent runs up to max_iterations)
    sweepkit.write_matrix(tmp_path, [HOST_PYTHON], name="short", gpus=None, defaults={
        "max_iterations": 2000, "min_iterations": 80, "sample_every": 10})
    # WHEN --iterations 1: THEN it is the length asked for, and too short: refused
    code = main(["sweep", str(tmp_path / "m.yaml"), "--iterations", "1",
                 "--out", str(tmp_path / "out")])
    assert code == 2 and not (tmp_path / "out").exists()
    assert "1 measured iteration cannot decide" in capsys.readouterr().err
    # AND a length that can decide bounds the run (min_iterations lowered to fit)
    from harness.cli import build_parser
    from harness.stages.options import apply_overrides

    args = build_parser().parse_args(["sweep", "m.yaml", "--iterations", "50"])
    (cell,) = apply_overrides(list(matrixfile.load(tmp_path / "m.yaml").cells), args.iterations)
    assert (cell.settings.agent_iterations, cell.settings.min_iterations) == (50, 50)


@pytest.mark.parametrize("argv", [["--help"], ["sweep", "--help"]])
def test_help_documents_the_incomplete_exit_code(argv: list[str],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "4 no cell bad" in text or "4 no cell bad, but not a complete answer" in text


def test_a_short_length_in_the_matrix_is_said_not_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a matrix that asks for 5 calls itself (a smoke or OOM check of a heavy scenario)
    sweepkit.write_matrix(tmp_path, [HOST_PYTHON], name="smoke", gpus=None, defaults={
        "iterations": 5, "warmup": 1, "sample_every": 1, "repeats": 0})
    code = main(["sweep", str(tmp_path / "m.yaml"), "--out", str(tmp_path / "out"), "-q"])
    err = capsys.readouterr().err
    # THEN it runs, says what such a run can tell, and is not called clean
    assert "only how it ends (oom, crash, timeout) can be told" in err
    assert list((tmp_path / "out").glob("smoke/*/results.json"))
    assert code == EXIT_UNDECIDED


def test_cells_a_busy_host_left_undecided_are_not_told_to_run_longer() -> None:
    """A fresh-clone CI's clean TF cell ended `ambiguous` by rule busy-host ("run-queue
    delay rose 415 us/step, 61% of the slowdown") and the sweep said "run longer:
    --iterations 300": a longer run on the same busy host is no cure."""
    from harness.sweeping.course import how_to_decide

    def report(*rules: str) -> SimpleNamespace:
        results = {f"c{i}": SimpleNamespace(rule=r, end=SimpleNamespace(mode="loop"))
                   for i, r in enumerate(rules)}
        return SimpleNamespace(undecided_cells=sorted(results), results=results,
                               missing_cells=[])
    cells = [SimpleNamespace(id=f"c{i}", settings=SimpleNamespace(
        run_budget=None, max_iterations=None, iterations=150)) for i in range(2)]
    m, root = Path("m.yaml"), Path("r")
    # WHEN every undecided cell was left so by a busy host: run again, not longer
    said = how_to_decide(report("busy-host", "busy-host"), m, root, cells)  # type: ignore[arg-type]
    assert "busy" in said and "quieter host" in said and "--iterations" not in said
    # WHEN one was left undecided for its memory: run longer, as before
    said = how_to_decide(report("busy-host", "unsure"), m, root, cells)  # type: ignore[arg-type]
    assert said == "run longer: harness sweep m.yaml --iterations 300"


def test_a_busy_host_under_iterations_runs_the_same_length_again(tmp_path: Path) -> None:
    """`--iterations N` bounds every run of a cell, so an undecided one stood (rule
    `rerun-asked`), told to raise N; one a busy host alone left undecided (rule
    `busy-host`) runs again at the same length (rule `rerun-busy`), within N."""
    import dataclasses

    matrix = grow_matrix(tmp_path, iterations=200, warmup=5, sample_every=10, repeats=2)
    got: list[int] = []

    def behave(cell: Any) -> Behaviour:
        got.append(cell.settings.agent_iterations)
        # the first run: late steps slower, the rise all run-queue delay (a busy host);
        # its CPU time per step (1 ms) within what the wait leaves of each (a tenth of
        # 10-14 ms), as a real host's is
        return (Behaviour(step_s=0.01, slowdown_per_iter=2e-5, rq_share=0.9, cpu_s=0.001)
                if len(got) == 1 else Behaviour())

    def asked(cells: list[Any]) -> list[Any]:
        return [c.with_settings(dataclasses.replace(c.settings, asked_calls=200))
                for c in cells]

    res = sweepkit.sweep_matrix(matrix, FakeRuntime(behave), cells=asked).results[
        "a.gpu0.loop"]
    assert [(a.verdict, a.rerun) for a in res.attempts][:1] == [("ambiguous", "rerun-busy")]
    assert "busy host" in res.attempts[0].reason
    assert got == [200, 200] and res.verdict == "ok", res.attempts
    # a cell undecided for its memory (150 B/call: rule `creep`) still stands
    got.clear()
    creep = sweepkit.sweep_matrix(matrix, FakeRuntime(
        lambda c: (got.append(c.settings.agent_iterations), Behaviour(
            leak_per_iter=150))[1]), cells=asked).results["a.gpu0.loop"]
    assert [(a.verdict, a.rerun) for a in creep.attempts] == [("ambiguous", "rerun-asked")], \
        creep.attempts
    assert got == [200]
