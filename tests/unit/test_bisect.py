"""Bisect: the pure planner over stated verdicts, then the driver and CLI over FakeRuntime."""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest
import sweepkit
from fakeruntime import Behaviour, FakeRuntime

from harness import matrixfile
from harness.answers.search import plan_bisect
from harness.bisect import attempts, bisect, expected_probes, latest, sweep_runner
from harness.cli import main
from harness.matrixfile.model import Cell, Matrix
from harness.stages.orchestrator import Sweep
from harness.store import RunStore


# ---------------------------------------------------------------- planner (pure)
def drive(n: int, truth: Callable[[int, int], str], repeats: int = 1) -> tuple[list[int], object]:
    """Run the planner against `truth(index, attempt)`; return the probed indices and end."""
    observed: dict[int, list[str]] = {}
    probed: list[int] = []
    while True:
        step = plan_bisect(n, observed, repeats)
        if step.action != "probe":
            return probed, step
        assert step.index is not None
        probed.append(step.index)
        seen = observed.setdefault(step.index, [])
        seen.append(truth(step.index, len(seen)))


@pytest.mark.parametrize("n", [2, 3, 8, 40, 128])
def test_every_culprit_is_found_within_log2_probes(n: int) -> None:
    for culprit in range(1, n):
        probed, step = drive(n, lambda i, _, c=culprit: "leak" if i >= c else "ok")
        assert step.action == "found", (n, culprit)  # type: ignore[attr-defined]
        assert (step.lo, step.hi) == (culprit - 1, culprit)  # type: ignore[attr-defined]
        assert len(probed) <= expected_probes(n)
        assert len(set(probed)) == len(probed)  # nothing probed twice without noise


def test_forty_tags_in_eight_runs() -> None:
    assert expected_probes(40) == 2 + math.ceil(math.log2(39)) == 8


def test_endpoints_come_first() -> None:
    probed, _ = drive(40, lambda i, _: "leak" if i >= 17 else "ok")
    assert probed[:2] == [0, 39]


@pytest.mark.parametrize(("truth", "index", "why"), [
    (lambda i, _: "leak", 0, "endpoint is bad, must be good"),
    (lambda i, _: "ok", 9, "endpoint is good, must be bad"),
    (lambda i, _: "ambiguous" if i == 0 else "leak", 0, "endpoint stayed undecided"),
])
def test_bad_endpoints_stop(truth: Callable[[int, int], str], index: int, why: str) -> None:
    probed, step = drive(10, truth)
    assert step.action == "stop"  # type: ignore[attr-defined]
    assert step.index == index  # type: ignore[attr-defined]
    assert step.why.startswith(why)  # type: ignore[attr-defined]
    assert len(probed) <= 3


def test_ambiguous_probe_is_repeated_then_decided() -> None:
    # GIVEN image 4 (the first midpoint) is ambiguous once, then leaks
    def truth(i: int, attempt: int) -> str:
        if i == 4 and attempt == 0:
            return "ambiguous"
        return "leak" if i >= 3 else "ok"

    probed, step = drive(10, truth)
    assert probed.count(4) == 2
    assert (step.lo, step.hi) == (2, 3)  # type: ignore[attr-defined]


def test_undecided_image_is_skipped_like_git_bisect_skip() -> None:
    # GIVEN image 3 can never be decided (and is not-applicable the other time)
    for stuck in ("ambiguous", "not-applicable"):
        probed, step = drive(8, lambda i, _, s=stuck: s if i == 3 else
                             ("leak" if i >= 4 else "ok"))
        assert step.action == "found"  # type: ignore[attr-defined]
        assert (step.lo, step.hi) == (2, 4)  # type: ignore[attr-defined]
        assert step.skipped == (3,)  # type: ignore[attr-defined]
        assert probed.count(3) == (2 if stuck == "ambiguous" else 1)


def test_planner_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="at least two"):
        plan_bisect(1, {})
    with pytest.raises(ValueError, match="out of range"):
        plan_bisect(3, {5: ["ok"]})


# ---------------------------------------------------------------- driver over FakeRuntime
def make_matrix(tmp: Path, n: int) -> Matrix:
    return matrixfile.load(sweepkit.write_matrix(
        tmp, [f"v{i:02d}" for i in range(n)], name="bis", gpus=[0, 1],
        defaults={**sweepkit.DEFAULTS, "iterations": 200}))


def leaks_from(culprit: int) -> Callable[[Cell], Behaviour]:
    return lambda c: Behaviour(leak_per_iter=16384) if c.image.index >= culprit else Behaviour()


def row(matrix: Matrix) -> list[Cell]:
    return sorted((c for c in matrix.cells if c.row == "gpu0.loop"), key=lambda c: c.image.index)


def test_driver_finds_the_culprit_in_eight_runs(tmp_path: Path) -> None:
    # GIVEN 40 tags, leaking from v23 on
    matrix = make_matrix(tmp_path, 40)
    runtime = FakeRuntime(leaks_from(23))
    store = RunStore(tmp_path / "store")
    cells = row(matrix)
    said: list[str] = []
    # WHEN bisected through Sweep.run_cell
    out = bisect(cells, sweep_runner(Sweep(matrix, runtime, store, lambda _: None), cells),
                 said.append, lambda c: store.load_cell(c.id))
    # THEN v23 is the first bad, v22 the last good, in at most 8 cell runs
    assert (out.first_bad, out.last_good) == ("v23", "v22")
    assert len(runtime.runs) == out.runs <= 8
    assert said[0].startswith("endpoint v00 [1/40, run 1]: ok")
    assert said[1].startswith("endpoint v39 [40/40, run 2]: leak")
    assert "-> first bad is in v01..v39 (38 untested)" in said[1]
    assert said[-1].endswith("-> first bad is v23 (last good v22)")
    assert ("pip demo", "v22", "v23") in out.diff()
    assert out.sentence() == "first bad: v23 (last good: v22)"

    # WHEN bisected again over the same store THEN nothing runs: every probe is cached
    again = FakeRuntime(leaks_from(23))
    out2 = bisect(cells, sweep_runner(Sweep(matrix, again, store, lambda _: None), cells),
                  lambda _: None, lambda c: store.load_cell(c.id))
    assert again.runs == [] and out2.reused == out.probes and out2.first_bad == "v23"


def test_driver_stops_when_the_first_image_is_bad(tmp_path: Path) -> None:
    matrix = make_matrix(tmp_path, 6)
    runtime = FakeRuntime(leaks_from(0))
    cells = row(matrix)
    out = bisect(cells, sweep_runner(Sweep(matrix, runtime, RunStore(tmp_path / "s"),
                                           lambda _: None), cells), lambda _: None)
    assert not out.found and runtime.runs == ["v00.gpu0.loop"]
    assert out.sentence().startswith("stopped: the first image v00 is leak (")
    assert out.sentence().endswith("but bisect needs it good")


def test_probe_slower_than_the_first_image_is_a_regression(tmp_path: Path) -> None:
    # GIVEN no leak anywhere, but v03 and later take twice as long per step
    matrix = make_matrix(tmp_path, 6)
    runtime = FakeRuntime(lambda c: Behaviour(step_s=0.002) if c.image.index >= 3
                          else Behaviour())
    cells = row(matrix)
    out = bisect(cells, sweep_runner(Sweep(matrix, runtime, RunStore(tmp_path / "s"),
                                           lambda _: None), cells), lambda _: None)
    assert out.first_bad == "v03"
    assert out.results[5].verdict == "regression"


# ---------------------------------------------------------------- CLI
@pytest.fixture
def fake_cli(monkeypatch: pytest.MonkeyPatch) -> list[FakeRuntime]:
    made: list[FakeRuntime] = []

    def get_runtime(name: str, docker_host: str | None = None) -> FakeRuntime:
        made.append(FakeRuntime(leaks_from(5)))
        return made[-1]

    monkeypatch.setattr("harness.runtimes.get_runtime", get_runtime)
    return made


def test_cli_bisect(tmp_path: Path, fake_cli: list[FakeRuntime],
                    capsys: pytest.CaptureFixture[str]) -> None:
    make_matrix(tmp_path, 12)
    argv = ["bisect", str(tmp_path / "m.yaml"), "--gpu", "0", "--out", str(tmp_path / "r"), "-q"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "bisect gpu0.loop over 12 images (v00 .. v11): at most 6 probes" in out
    assert "gpu0.loop: first bad: v05 (last good: v04)" in out
    assert "  pip demo: v04 -> v05" in out
    # Issue 63 item 14: -q prints no line per probe
    assert "probe" not in out.replace("at most 6 probes", ""), out
    assert len(fake_cli[0].runs) <= 6
    # a second run reuses the cells kept under <out>/<name>/bisect-<row>; without -q
    # each probe is said
    assert main(argv[:-1]) == 1
    assert fake_cli[1].runs == []
    out = capsys.readouterr().out
    assert "0 cell run(s)" in out and "probe v05 [6/12, cached]" in out, out


@pytest.mark.parametrize(("extra", "message"), [
    ([], "the matrix has several gpus; pass --gpu (allowed values: gpu0, gpu1)"),
    (["--gpu", "7"], "--gpu 7: not in"),
    (["--gpu", "0", "--scenario", "nope"], "--scenario nope: not in"),
    (["--gpu", "0", "--repeats", "-1"], "--repeats must be >= 0"),
    (["--gpu", "0", "--reuse", "/nonexistent"], "--reuse /nonexistent: no cells/"),
])
def test_cli_bisect_bad_input(tmp_path: Path, fake_cli: list[FakeRuntime], extra: list[str],
                              message: str, capsys: pytest.CaptureFixture[str]) -> None:
    make_matrix(tmp_path, 4)
    assert main(["bisect", str(tmp_path / "m.yaml"), "--out", str(tmp_path / "r"),
                 *extra]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_cli_bisect_endpoint_not_good_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    make_matrix(tmp_path, 4)
    monkeypatch.setattr("harness.runtimes.get_runtime",
                        lambda name, host=None: FakeRuntime(leaks_from(0)))
    assert main(["bisect", str(tmp_path / "m.yaml"), "--gpu", "gpu1", "--out",
                 str(tmp_path / "r"), "-q"]) == 2
    captured = capsys.readouterr()
    assert "stopped: the first image v00 is leak" in captured.out
    assert "fix: bisect between a known-good and a known-bad image: --good IMAGE" in captured.err


def test_cli_bisect_reuses_an_earlier_sweep(tmp_path: Path, fake_cli: list[FakeRuntime],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a sweep that already ran the endpoints of row gpu0.loop
    matrix = make_matrix(tmp_path, 12)
    store = sweepkit.sweep_matrix(matrix, leaks_from(5), out=tmp_path / "sweeps", cells=lambda _: [
        c for c in row(matrix) if c.image.index in (0, 11)]).store
    # WHEN bisecting with --reuse THEN the endpoints are not run again
    assert main(["bisect", str(tmp_path / "m.yaml"), "--gpu", "0", "--out",
                 str(tmp_path / "r"), "--reuse", str(store.root)]) == 1
    out = capsys.readouterr().out
    assert "endpoint v00 [1/12, cached]: ok" in out and "endpoint v11 [12/12, cached]" in out
    assert "v00.gpu0.loop" not in fake_cli[0].runs and "v11.gpu0.loop" not in fake_cli[0].runs
    assert "gpu0.loop: first bad: v05 (last good: v04)" in out


def test_cli_bisect_reuses_the_newest_sweep_of_its_matrix_file_unasked(
        tmp_path: Path, fake_cli: list[FakeRuntime], capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 87 item 7: right after a sweep of the same matrix, into the same reports
    folder, a bisect reuses its cells whose run keys hold, and says where from (before:
    `4 cell run(s), 0 reused`)."""
    # GIVEN a sweep of the matrix that ran the endpoints of row gpu0.loop
    matrix = make_matrix(tmp_path, 12)
    store = sweepkit.sweep_matrix(matrix, leaks_from(5), out=tmp_path / "r", plan=True,
                                  cells=lambda _: [c for c in row(matrix)
                                                   if c.image.index in (0, 11)]).store
    # WHEN bisecting with no --reuse THEN the endpoints are not run again, said
    assert main(["bisect", str(tmp_path / "m.yaml"), "--gpu", "0", "--out",
                 str(tmp_path / "r")]) == 1
    out = capsys.readouterr().out
    assert f"reusing the finished cells of the newest sweep of m.yaml whose run keys " \
           f"hold: {store.root}" in out, out
    assert "endpoint v00 [1/12, cached]: ok" in out and "endpoint v11 [12/12, cached]" in out
    assert "v00.gpu0.loop" not in fake_cli[0].runs and "v11.gpu0.loop" not in fake_cli[0].runs
    assert re.search(r"\d+ cell run\(s\), \d+ reused \(2 from ", out), out


def test_cli_bisect_good_bad_narrow_the_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The README's demo shape: bad in the middle, fixed later, so the last image is good."""
    make_matrix(tmp_path, 12)
    bad = {f"v{i:02d}" for i in range(5, 9)}
    monkeypatch.setattr("harness.runtimes.get_runtime", lambda name, host=None: FakeRuntime(
        lambda c: Behaviour(leak_per_iter=16384) if c.image.label in bad else Behaviour()))
    argv = ["bisect", str(tmp_path / "m.yaml"), "--gpu", "0", "--out", str(tmp_path / "r"),
            "-q"]
    assert main(argv) == 2                              # the last image is good again
    capsys.readouterr()
    assert main([*argv, "--good", "v01", "--bad", "v07"]) == 1
    out = capsys.readouterr().out
    assert "over 7 images (v01 .. v07)" in out
    assert "gpu0.loop: first bad: v05 (last good: v04)" in out
    assert main([*argv, "--good", "v07", "--bad", "v01"]) == 2
    assert "is not after --good v07" in capsys.readouterr().err
    assert main([*argv, "--bad", "v99"]) == 2
    assert "--bad v99: not an image of" in capsys.readouterr().err


def test_a_bad_end_that_runs_good_says_why_and_which_sweep_finds_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 51: `bisect --good multidict-6.4.4 --bad multidict-6.6.4` said "no bad image"
    without saying why: the leak came in 6.5 and 6.6.4 fixed it."""
    # GIVEN a row that leaks from v05 to v08 and is fixed in v09
    make_matrix(tmp_path, 12)
    bad = {f"v{i:02d}" for i in range(5, 9)}
    monkeypatch.setattr("harness.runtimes.get_runtime", lambda name, host=None: FakeRuntime(
        lambda c: Behaviour(leak_per_iter=16384) if c.image.label in bad else Behaviour()))
    argv = ["bisect", str(tmp_path / "m.yaml"), "--gpu", "0", "--out", str(tmp_path / "r"),
            "-q"]
    # WHEN bisected from a good image to a fixed one
    assert main([*argv, "--good", "v01", "--bad", "v11"]) == 2
    got = capsys.readouterr()
    # THEN it says the bad end ran good, and that the images between were never run
    assert "gpu0.loop: no bad image: the last image v11 is ok (" in got.out, got.out
    assert ("bisect searches back from a bad last image, so the 9 image(s) between v01 and "
            "v11 were not run (a regression that v11 fixed would be there)") in got.out
    # AND its fix names the sweep that shows every image, which finds the first bad
    fix = got.err.split("fix: ", 1)[1]
    assert fix.startswith("pass --bad an image that is bad when run; `harness sweep "), fix
    sweep = shlex.split(fix.split("`")[1])
    assert main([*sweep[1:], "--out", str(tmp_path / "r"), "-q"]) == 1
    assert "gpu0.loop: first bad: v05 (last good: v04)" in capsys.readouterr().out
    # AND two good images with none between: no bad image, and that is why
    assert main([*argv, "--good", "v10", "--bad", "v11"]) == 2
    assert ("no bad image: the last image v11 is ok (") in (out := capsys.readouterr().out)
    assert "and the first (v10) good, with no image between them" in out, out


def test_a_probe_that_drifted_once_is_not_called_bad(tmp_path: Path) -> None:
    # GIVEN every image is the same speed, but v02's probe ran on a host 30 % slower
    matrix = make_matrix(tmp_path, 6)
    first_v02 = [True]

    def behave(c: Cell) -> Behaviour:
        if c.image.index == 5:
            return Behaviour(step_s=0.002)          # the true culprit: last image
        if c.image.index == 2 and first_v02[0]:
            first_v02[0] = False
            return Behaviour(step_s=0.0013)
        return Behaviour()

    runtime = FakeRuntime(behave)
    cells = row(matrix)
    out = bisect(cells, sweep_runner(Sweep(matrix, runtime, RunStore(tmp_path / "s"),
                                           lambda _: None), cells), lambda _: None)
    # THEN the probes use the same interleaved confirmation as a sweep
    assert out.first_bad == "v05"
    assert out.results[5].vs_baseline.confirmation.confirmed is True
    assert out.results[2].verdict == "ok"
    assert out.results[2].vs_baseline.confirmation.confirmed is False


def test_a_probe_run_again_is_a_new_attempt_beside_the_first(tmp_path: Path) -> None:
    # GIVEN a bisect's runner that has probed v02 once
    matrix = make_matrix(tmp_path, 4)
    runtime = FakeRuntime(lambda c: Behaviour(leak_per_iter=16384) if runtime.runs[1:]
                          else Behaviour())
    store = RunStore(tmp_path / "s")
    cells = row(matrix)
    run = sweep_runner(Sweep(matrix, runtime, store, lambda _: None), cells)
    first = run(cells[2])
    written = (store.root / "cells" / cells[2].id / "result.json").read_bytes()
    # WHEN the planner probes v02 again (an undecided image is probed up to --repeats)
    again = run(cells[2])
    # THEN the first run's record stands as written; the new run is attempt 2 beside it
    assert (store.root / "cells" / cells[2].id / "result.json").read_bytes() == written
    assert (first.id, first.verdict) == (cells[2].id, "ok")
    assert (again.id, again.verdict) == (f"{cells[2].id}.attempt-2", "leak")
    assert (store.root / "cells" / f"{cells[2].id}.attempt-2" / "samples.jsonl").is_file()
    assert [r.id for r in attempts(store, cells[2].id)] == [first.id, again.id]
    # AND the latest attempt answers for the image when the row is bisected again
    assert latest(store, cells[2].id) == again
    assert run(cells[2]).id == f"{cells[2].id}.attempt-3"
    assert latest(store, cells[0].id) is None
