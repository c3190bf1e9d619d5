"""Unsettled is undecided everywhere (issue 78): confirmation rounds whose interval holds
both "no change" and "slower" leave the cell `ambiguous` (rule `unsettled`, exit 4),
never `ok`, in a sweep, `sweep --between`, `compare` and `bisect`; rounds that disagree
run on (up to twice `rounds`) while more of them may settle it.

The fake runtime reads each confirmation run's round from its directory
(`rounds/<k>-suspect`) and runs the suspect at the ratio given for that round."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest
from fakeruntime import Behaviour, FakeRuntime
from sweepkit import swept, write_matrix

from harness.cli import main
from harness.errors import EXIT_OK, EXIT_UNDECIDED
from harness.matrixfile.model import Cell
from harness.runtimes.base import Progress, RunOutcome, RunRequest
from harness.sweeping.course import exit_code

STEP_S = 0.001
DEFAULTS = {"iterations": 400, "warmup": 20, "sample_every": 5, "repeats": 0}
# None: that round's suspect run waited for a CPU 80 % of its step (the host busy, its
# CPU time not recorded): the round is left out (rule `round-busy`).
BUSY = None


class PerRound(FakeRuntime):
    """The baseline image (`old`, `v1`) at STEP_S; the suspect's own run `pooled`x
    slower (the pooled comparison suspects it), its k-th confirmation run ratios[k-1]x."""

    ratios: Sequence[float | None]
    pooled: float

    def run(self, request: RunRequest, progress: Progress) -> RunOutcome:
        where = request.outdir
        k = 0
        if where.parent.name == "rounds" and where.name.endswith("-suspect"):
            k = int(where.name.split("-")[0])
        self.behave = lambda c: self.behaviour(c, k)
        return super().run(request, progress)

    def behaviour(self, cell: Cell, k: int) -> Behaviour:
        if cell.image.label in ("old", "v1"):
            return Behaviour(step_s=STEP_S)
        if k == 0:
            return Behaviour(step_s=STEP_S * self.pooled)
        ratio = self.ratios[k - 1] if k <= len(self.ratios) else 1.0
        if ratio is BUSY:
            return Behaviour(step_s=STEP_S * 2, rq_share=0.8)
        return Behaviour(step_s=STEP_S * ratio)


def per_round(ratios: Sequence[float | None], pooled: float = 1.4) -> PerRound:
    runtime = PerRound(lambda c: Behaviour())
    runtime.ratios, runtime.pooled = ratios, pooled
    return runtime


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The busy rounds' back-off waits cut short for the test."""
    import harness.stages.settle as confirm

    monkeypatch.setattr(confirm, "BACKOFF_S", 0.0)
    monkeypatch.setattr(confirm, "MAX_BACKOFF_S", 0.0)


# The rounds (0.94, left out, 2.29), then more of the same spread: a slowdown in
# some rounds and none in others, the interval wide across `min_ratio`.
SPLIT = [0.94, BUSY, 2.29, 0.95, 2.2, 0.96]


def test_rounds_that_hold_no_change_and_slower_leave_the_cell_undecided(
        tmp_path: Path, no_backoff: None) -> None:
    run = swept(tmp_path, ["v1", "v2"], per_round(SPLIT), defaults=DEFAULTS)
    res = run.results["v2.gpu0.loop"]
    conf = res.vs_baseline.confirmation if res.vs_baseline else None
    assert conf is not None and conf.direction == "~", res.reason
    # THEN undecided, never ok: the rounds ran on past their disagreement (up to twice
    # `rounds`), and their interval still holds both answers
    assert res.verdict == "ambiguous" and res.rule == "unsettled", res.reason
    assert len(conf.rounds) == 6, conf.reason
    assert conf.lo <= 1.1 < conf.hi, conf.reason
    # AND it says how many rounds ran, how many the host left out, and what settles it
    assert "6 rounds ran, 5 counted, 1 left out (host busy)" in res.reason, res.reason
    assert "more rounds (`rounds: 6`" in res.reason and "a quieter host" in res.reason
    # AND the sweep exits 4 with no bad image named
    report = run.report()
    assert exit_code(report) == EXIT_UNDECIDED
    assert not report.bad_cells


def test_rounds_that_disagree_about_no_change_run_on_until_it_is_settled(
        tmp_path: Path, no_backoff: None) -> None:
    # GIVEN a pooled suspicion the rounds do not bear out: two disagree by a few percent
    run = swept(tmp_path, ["v1", "v2"], per_round([0.97, 1.03, 0.99, 1.01, 0.98, 1.02]),
                defaults=DEFAULTS)
    res = run.results["v2.gpu0.loop"]
    conf = res.vs_baseline.confirmation if res.vs_baseline else None
    # THEN a third round settles it (its interval under `min_ratio`): ok, exit 0
    assert res.verdict == "ok", res.reason
    assert conf is not None and len(conf.rounds) == 3 and conf.hi < 1.1, conf.reason
    assert exit_code(run.report()) == EXIT_OK


def lock(path: Path, version: str) -> Path:
    digest = hashlib.sha256(version.encode()).hexdigest()
    path.write_text(f"jsonschema=={version} \\\n    --hash=sha256:{digest}\n")
    return path


def test_between_two_locks_with_unsettled_rounds_exits_4(
        tmp_path: Path, no_backoff: None, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the run: `sweep --between old.txt new.txt`, rounds 0.94 and 2.29 with
    # one left out (the host busy)
    made: list[PerRound] = []

    def get_runtime(name: str, docker_host: str | None = None) -> PerRound:
        made.append(per_round(SPLIT))
        return made[-1]

    monkeypatch.setattr("harness.runtimes.get_runtime", get_runtime)
    (tmp_path / "js_validate.py").write_text(
        "def setup(params):\n    return None\n\n\ndef step(state):\n    pass\n")
    code = main(["sweep", "--between", str(lock(tmp_path / "old.txt", "4.17.3")),
                 str(lock(tmp_path / "new.txt", "4.19.0")), "--scenario",
                 str(tmp_path / "js_validate.py"), "--out", str(tmp_path / "r"),
                 "--iterations", "400", "--warmup", "20"])
    out, err = capsys.readouterr()
    # THEN exit 4, the cell undecided in words, no bad image named
    assert code == EXIT_UNDECIDED, out + err
    assert "first bad: new" not in out
    assert "undecided vs old" in out + err, out
    # AND its last line says what settles it: more rounds or a quieter host, not a longer run
    assert "left the doubt open (rule unsettled), which a longer run does not settle: more " \
           "rounds (`rounds: 6` in the matrix's `defaults:`) or a quieter host; exit 4" \
           in out + err, out + err
    # AND `report` and `harness compare` (of the run and a copy of it) say so too: exit 4
    (run,) = [p for p in (tmp_path / "r").glob("*/*") if p.is_dir()]
    assert main(["report", str(run)]) == EXIT_UNDECIDED
    copy = tmp_path / "copy" / run.name
    shutil.copytree(run, copy)
    capsys.readouterr()
    assert main(["compare", str(run), str(copy)]) == EXIT_UNDECIDED, capsys.readouterr()


def test_bisect_whose_bad_end_stays_unsettled_exits_4(
        tmp_path: Path, no_backoff: None, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a bad end whose every probe's rounds hold both no change and slower
    monkeypatch.setattr("harness.runtimes.get_runtime",
                        lambda name, host=None: per_round(SPLIT))
    path = write_matrix(tmp_path, ["v1", "v2"], defaults=DEFAULTS)
    code = main(["bisect", str(path), "--good", "v1", "--bad", "v2", "--out",
                 str(tmp_path / "r"), "-q"])
    out, err = capsys.readouterr()
    # THEN no first bad, and no wrong input either: the answer is not whole (exit 4)
    assert "stopped: the last image v2 is ambiguous (undecided vs v1: " in out, out
    assert "first bad" not in out
    assert code == EXIT_UNDECIDED, out + err


def test_a_saved_runs_rounds_that_hold_both_leave_it_undecided(
        tmp_path: Path, no_backoff: None) -> None:
    """The comparison of `harness.check(..., baseline=Saved(...))` and of a
    `harness_time` test against a saved run (`api.run`): the same rounds, the same
    answer, undecided (which the plugin passes with a warning)."""
    from harness import matrixfile
    from harness.api.run import against_saved
    from harness.stages.orchestrator import Sweep
    from harness.store import RunStore

    matrix = matrixfile.load(write_matrix(tmp_path, ["v1", "v2"], defaults=DEFAULTS))
    v1, v2 = sorted(matrix.cells, key=lambda c: c.image.label)
    sweep = Sweep(matrix, per_round(SPLIT), RunStore(tmp_path / "run", durable=False),
                  lambda _: None)
    try:
        saved, measured = sweep.run_cell(v1), sweep.run_cell(v2)
        res = against_saved(sweep.ctx, v2, measured, saved.result, saved.series,
                            "main (saved)")
    finally:
        sweep.images.close()
    assert (res.verdict, res.rule) == ("ambiguous", "unsettled"), res.reason
    assert "undecided vs main (saved): the rounds' interval" in res.reason, res.reason
