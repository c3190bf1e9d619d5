"""The sweep pipeline against FakeRuntime: the truth is stated per cell, verdicts checked."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fakeruntime import Behaviour, FakeRuntime
from sweepkit import DEFAULTS, sweep_matrix, write_matrix

from harness import matrixfile
from harness.answers.search import answer_rows
from harness.errors import StoreError
from harness.matrixfile.model import Cell, Matrix
from harness.report import ConsoleReporter, Report, write_all
from harness.result.model import SCHEMA
from harness.runtimes.base import Progress, RunOutcome, RunRequest
from harness.stages.orchestrator import SweepOutcome, lanes
from harness.store import RunStore, atomic_write_text


def make_matrix(tmp_path: Path, images: str = "v1, v2, v3", gpus: str = "0",
                **top: Any) -> Matrix:
    path = write_matrix(tmp_path, [x.strip() for x in images.split(",")], name="orc",
                        gpus=[g.strip() for g in gpus.split(",")], file="matrix.yaml",
                        defaults={**DEFAULTS, "iterations": 400, "warmup": 20}, **top)
    return matrixfile.load(path)


def by_image(table: dict[str, Behaviour]) -> Callable[[Cell], Behaviour]:
    return lambda cell: table.get(cell.image.label, Behaviour())


def run(matrix: Matrix, runtime: FakeRuntime, base: Path, resume: bool = False,
        progress: Progress | None = None) -> SweepOutcome:
    return sweep_matrix(matrix, runtime, out=base / "reports", resume=resume,
                        progress=progress).outcome


def on_disk(outcome: SweepOutcome) -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted((outcome.store.root / "cells").glob("*/result.json")):
        data = json.loads(path.read_text())
        out[data["id"]] = data
    return out


# ---------------------------------------------------------------- verdicts
@dataclass
class Swept:
    outcome: SweepOutcome
    runtime: FakeRuntime
    verdicts: dict[str, str] = field(default_factory=dict)


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Swept:
    """One sweep: gpu0 is a version story (ok, slower, leaking); gpu1 has the failures."""
    tmp = tmp_path_factory.mktemp("sweep")
    matrix = make_matrix(tmp, "v1, v2, v3, v4", "0, 1")
    gpu0 = {"v1": Behaviour(), "v2": Behaviour(step_s=0.002),
            "v3": Behaviour(leak_per_iter=20_000), "v4": Behaviour(error="CUDA went away")}
    gpu1 = {"v1": Behaviour(oom=True), "v2": Behaviour(timed_out=True),
            "v3": Behaviour(truncate=True), "v4": Behaviour(exit_code=3)}
    runtime = FakeRuntime(lambda c: (gpu0 if c.gpu.value == "0" else gpu1)[c.image.label])
    outcome = run(matrix, runtime, tmp)
    return Swept(outcome, runtime, {k: r.verdict for k, r in outcome.results.items()})


def test_every_cell_ran_once_and_is_on_disk(swept: Swept) -> None:
    # v2 (slower) also ran interleaved confirmation rounds with its baseline v1, in
    # its lane right after it ran (before the lane's next cell, v3): three, since three
    # rounds 2x apart confirm it (`rules.CONFIRM_ROUNDS`)
    runs = swept.runtime.runs
    assert sorted(set(runs)) == sorted(swept.outcome.results)
    assert len(runs) == 8 + 3 * 2
    lane = [r for r in runs if ".gpu0." in r]    # the lanes run side by side
    after = lane.index("v2.gpu0.loop") + 1
    assert lane[after:after + 6] == ["v1.gpu0.loop", "v2.gpu0.loop"] * 3
    assert lane.index("v3.gpu0.loop") > after + 5
    assert sorted(swept.runtime.prepared) == ["v1", "v2", "v3", "v4"]
    assert on_disk(swept.outcome).keys() == swept.outcome.results.keys()
    assert swept.outcome.ran == 8 and swept.outcome.reused == 0


def test_clean_cell_is_ok(swept: Swept) -> None:
    res = swept.outcome.results["v1.gpu0.loop"]
    assert res.verdict == "ok"
    assert res.summary.iterations == 400
    assert res.end.status == "ok"
    assert res.memory["heap"].kind == "stable"


def test_slower_image_is_a_regression_vs_baseline(swept: Swept) -> None:
    res = swept.outcome.results["v2.gpu0.loop"]
    assert res.verdict == "regression"
    assert res.vs_baseline.baseline == "v1"
    assert res.vs_baseline.steps.direction == "slower"
    assert 1.8 < res.vs_baseline.steps.ratio < 2.2
    assert re.search(r"steps (1\.[89]\d|2\.[01]\d)x v1", res.reason), res.reason
    conf = res.vs_baseline.confirmation
    assert conf.confirmed and conf.decided_by == [1, 2, 3] and conf.lo > 1.1
    assert "confirmed: rounds 1, 2, 3" in res.reason
    assert all(1.8 < r.ratio < 2.2 for r in conf.rounds)
    assert on_disk(swept.outcome)["v2.gpu0.loop"]["verdict"] == "regression"


def test_leaking_image_is_a_leak(swept: Swept) -> None:
    res = swept.outcome.results["v3.gpu0.loop"]
    assert res.verdict == "leak"
    # The carrier is the source growing most per call: USS and RSS take the whole
    # 20_000 leaked bytes per iteration, Behaviour's heap half of it, said after it.
    assert res.carrier == "uss+rss"
    assert res.memory["heap"].slope == pytest.approx(10_000, rel=0.01)
    assert res.reason.startswith("uss+rss grows +19.5 KiB/call")
    assert "; also heap +9.8 KiB/call" in res.reason


def test_crash_keeps_the_message(swept: Swept) -> None:
    res = swept.outcome.results["v4.gpu0.loop"]
    assert res.verdict == "crash"
    assert res.reason == "RuntimeError: CUDA went away"
    assert "CUDA went away" in res.end.error.traceback
    assert swept.outcome.results["v4.gpu1.loop"].verdict == "crash"
    # (a crash with no end record: after the last call its samples counted)
    assert swept.outcome.results["v4.gpu1.loop"].reason == (
        "exit code 3 after call 420 (measured phase)")


def test_oom_and_timeout(swept: Swept) -> None:
    assert swept.verdicts["v1.gpu1.loop"] == "oom"
    assert "OOMKilled" in swept.outcome.results["v1.gpu1.loop"].reason
    assert swept.verdicts["v2.gpu1.loop"] == "timeout"
    assert swept.outcome.results["v2.gpu1.loop"].outcome.timed_out is True


def test_truncated_output_keeps_partial_data(swept: Swept) -> None:
    res = swept.outcome.results["v3.gpu1.loop"]
    assert res.verdict == "crash"
    assert "without an end record" in res.reason
    assert 0 < res.summary.iterations < 400
    assert res.memory  # the partial series was still analysed
    assert res.skipped_lines <= 1


def test_first_bad_per_row(swept: Swept) -> None:
    rows = {a.row: a for a in answer_rows(swept.outcome.results)}
    assert rows["gpu0.loop"].first_bad == "v2"
    assert rows["gpu0.loop"].last_good == "v1"
    assert rows["gpu0.loop"].contiguous
    assert rows["gpu1.loop"].first_bad == "v1"
    assert rows["gpu1.loop"].last_good is None
    report = Report.from_results("orc", swept.outcome.results)
    assert report.images == ["v1", "v2", "v3", "v4"]
    assert next(r.sentence for r in report.rows) == "first bad: v2 (last good: v1)"
    assert len(report.bad_cells) == 7


def test_leak_after_clean_image_is_first_bad(tmp_path: Path) -> None:
    # GIVEN v1 and v2 clean, v3 leaking, v4 leaking too
    matrix = make_matrix(tmp_path, "v1, v2, v3, v4")
    runtime = FakeRuntime(by_image({"v3": Behaviour(leak_per_iter=20_000),
                                    "v4": Behaviour(leak_per_iter=20_000)}))
    # WHEN swept and reported
    outcome = run(matrix, runtime, tmp_path)
    report = Report.from_results(matrix.name, outcome.results)
    (row,) = report.rows
    # THEN v3 is the first bad, v2 the last good, and the report says so
    assert [v for _, v, _ in row.cells] == ["ok", "ok", "leak", "leak"]
    assert (row.first_bad, row.last_good, row.contiguous) == ("v3", "v2", True)
    assert ("pip demo", "v2", "v3") in row.diff
    assert ("digest", "sha256:fake-v2", "sha256:fake-v3") in row.diff
    out = io.StringIO()
    ConsoleReporter.from_results(report).render(out)
    assert "gpu0.loop: first bad: v3 (last good: v2)" in out.getvalue()
    paths = write_all(outcome.store, report)
    assert json.loads(paths[0].read_text())["rows"][0]["first_bad"] == "v3"
    assert outcome.bad == ["v3.gpu0.loop", "v4.gpu0.loop"]


# ---------------------------------------------------------------- resume
def test_resume_reruns_only_missing_cells(tmp_path: Path) -> None:
    matrix = make_matrix(tmp_path)
    behave = by_image({"v2": Behaviour(step_s=0.002), "v3": Behaviour(leak_per_iter=20_000)})
    first = run(matrix, FakeRuntime(behave), tmp_path)
    before = {k: r["verdict"] for k, r in on_disk(first).items()}
    assert before == {"v1.gpu0.loop": "ok", "v2.gpu0.loop": "regression",
                      "v3.gpu0.loop": "leak"}
    # GIVEN the regression cell's result is lost (e.g. Ctrl-C while it was written)
    (first.store.root / "cells" / "v2.gpu0.loop" / "result.json").unlink()
    # WHEN the sweep is resumed
    again = FakeRuntime(behave)
    second = run(matrix, again, tmp_path, resume=True)
    # THEN only that cell runs again (and its confirmation rounds with the baseline),
    # in the same directory, with the same verdicts
    assert again.runs == ["v2.gpu0.loop"] + ["v1.gpu0.loop", "v2.gpu0.loop"] * 3
    assert (second.ran, second.reused) == (1, 2)
    assert second.store.root == first.store.root
    assert {k: r["verdict"] for k, r in on_disk(second).items()} == before


def test_resume_skips_a_broken_result(tmp_path: Path) -> None:
    matrix = make_matrix(tmp_path, "v1, v2")
    first = run(matrix, FakeRuntime(by_image({})), tmp_path)
    (first.store.root / "cells" / "v1.gpu0.loop" / "result.json").write_text('{"schema": 1, "ver')
    again = FakeRuntime(by_image({}))
    run(matrix, again, tmp_path, resume=True)
    # v2's comparison rested on the baseline's old run: it runs again beside the new one
    assert again.runs == ["v1.gpu0.loop", "v2.gpu0.loop"]


def test_resume_reuses_a_schema_1_result_and_compares_against_it(tmp_path: Path) -> None:
    matrix = make_matrix(tmp_path, "v1, v2")
    behave = by_image({"v2": Behaviour(leak_per_iter=20_000)})
    first = run(matrix, FakeRuntime(behave), tmp_path)
    cells = first.store.root / "cells"
    # GIVEN the baseline's result as an older harness wrote it (schema 1, no `unavailable`)
    # and the other cell lost
    base = json.loads((cells / "v1.gpu0.loop" / "result.json").read_text())
    base["schema"] = 1
    del base["unavailable"]
    (cells / "v1.gpu0.loop" / "result.json").write_text(json.dumps(base))
    (cells / "v2.gpu0.loop" / "result.json").unlink()
    again = FakeRuntime(behave)
    second = run(matrix, again, tmp_path, resume=True)
    # THEN the old baseline is reused, and the re-run cell is compared with it (its
    # samples read from disk once) and written once
    assert again.runs == ["v2.gpu0.loop"]
    res = second.results["v2.gpu0.loop"]
    assert res.verdict == "leak" and res.vs_baseline is not None
    assert res.vs_baseline.baseline == "v1" and res.vs_baseline.peak_rss is not None
    assert second.results["v1.gpu0.loop"].schema == SCHEMA
    assert json.loads((cells / "v2.gpu0.loop" / "result.json").read_text())["schema"] == SCHEMA


def test_resume_without_an_earlier_sweep(tmp_path: Path) -> None:
    from harness.errors import InputError

    with pytest.raises(InputError, match="run without --resume first"):
        RunStore.open(tmp_path, "never", True)


# ---------------------------------------------------------------- lanes, parallelism
def test_lanes_are_per_gpu(tmp_path: Path) -> None:
    matrix = make_matrix(tmp_path, "v1, v2", "0, 1, none")
    groups = lanes(list(matrix.cells))
    assert [[c.id for c in g] for g in groups] == [
        ["v1.gpu0.loop", "v2.gpu0.loop"], ["v1.gpu1.loop", "v2.gpu1.loop"],
        ["v1.cpu.loop", "v2.cpu.loop"]]
    assert all(len({c.gpu.value for c in g}) == 1 for g in groups)


@dataclass
class CountingRuntime(FakeRuntime):
    """FakeRuntime that records how many cells (and per GPU) run at once."""

    delay: float = 0.05
    active: dict[str, int] = field(default_factory=dict)
    most: int = 0
    most_per_gpu: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, request: RunRequest, progress: Progress) -> RunOutcome:
        gpu = request.cell.gpu.value
        with self.lock:
            self.active[gpu] = self.active.get(gpu, 0) + 1
            self.most = max(self.most, sum(self.active.values()))
            self.most_per_gpu = max(self.most_per_gpu, self.active[gpu])
        time.sleep(self.delay)
        try:
            return super().run(request, progress)
        finally:
            with self.lock:
                self.active[gpu] -= 1


def test_gpus_run_in_parallel_one_cell_each(tmp_path: Path) -> None:
    matrix = make_matrix(tmp_path, "v1, v2", "0, 1, 2")
    runtime = CountingRuntime(by_image({}))
    outcome = run(matrix, runtime, tmp_path)
    assert len(outcome.results) == 6
    assert runtime.most >= 2
    assert runtime.most_per_gpu == 1


def test_max_parallel_limits_lanes(tmp_path: Path) -> None:
    matrix = make_matrix(tmp_path, "v1, v2", "0, 1, 2", **{"max-parallel": 1})
    assert matrix.max_parallel == 1
    runtime = CountingRuntime(by_image({}))
    outcome = run(matrix, runtime, tmp_path)
    assert len(outcome.results) == 6
    assert runtime.most == 1


def test_fail_fast_stops_after_the_first_bad_cell(tmp_path: Path) -> None:
    matrix = make_matrix(tmp_path, "v1, v2, v3", **{"fail-fast": True})
    runtime = FakeRuntime(by_image({"v2": Behaviour(error="boom")}))
    outcome = run(matrix, runtime, tmp_path)
    assert runtime.runs == ["v1.gpu0.loop", "v2.gpu0.loop"]
    assert outcome.bad == ["v2.gpu0.loop"]


def test_progress_names_every_cell(tmp_path: Path) -> None:
    matrix = make_matrix(tmp_path, "v1, v2")
    lines: list[str] = []
    run(matrix, FakeRuntime(by_image({})), tmp_path, progress=lines.append)
    assert any(line.startswith("[1/2] v1.gpu0.loop: ok") for line in lines)
    assert any(line.startswith("[2/2] v2.gpu0.loop: ok") for line in lines)


# ---------------------------------------------------------------- store
def test_a_second_store_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    first = RunStore.open(tmp_path, "orc", False)
    first.mark("sweep", "orc", "m.yaml")
    try:
        with pytest.raises(StoreError, match="in use by pid") as info:
            RunStore.open(tmp_path, "orc", first.root)
        assert str(os.getpid()) in str(info.value)
        assert "fix:" in str(info.value)
    finally:
        first.unlock()
    # once unlocked, it can be opened again
    RunStore.open(tmp_path, "orc", first.root).unlock()


def test_two_fresh_stores_get_distinct_directories(tmp_path: Path) -> None:
    a = RunStore.open(tmp_path, "orc", False)
    b = RunStore.open(tmp_path, "orc", False)
    try:
        assert a.root != b.root
    finally:
        a.unlock()
        b.unlock()


def test_atomic_write_replaces_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "r.json"
    atomic_write_text(path, "old")
    atomic_write_text(path, "new")
    assert path.read_text() == "new"
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]  # no temp file left


def _chmod_stops_us(directory: Path) -> bool:
    probe = directory / "probe"
    try:
        probe.write_text("x")
    except OSError:
        return True
    probe.unlink()
    return False


def test_atomic_write_into_read_only_dir(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if not _chmod_stops_us(ro):
            pytest.skip("running as root: chmod does not stop writes (see the next tests)")
        with pytest.raises(StoreError, match="permission denied"):
            atomic_write_text(ro / "result.json", "{}")
    finally:
        ro.chmod(0o700)


def test_atomic_write_over_a_directory_is_a_store_error(tmp_path: Path) -> None:
    # GIVEN the target name is taken by a directory (rename fails even for root)
    (tmp_path / "result.json").mkdir()
    with pytest.raises(StoreError, match="cannot write") as info:
        atomic_write_text(tmp_path / "result.json", "{}")
    assert isinstance(info.value.__cause__, OSError)
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]  # temp file cleaned


def test_atomic_write_under_a_file_is_a_store_error(tmp_path: Path) -> None:
    # GIVEN the parent "directory" is a regular file (root cannot write there either)
    (tmp_path / "reports").write_text("not a directory")
    with pytest.raises(StoreError, match="cannot write"):
        atomic_write_text(tmp_path / "reports" / "result.json", "{}")


# ---------------------------------------------------------------- confirmation rounds
def drifting(first_step_s: float, then_step_s: float, label: str = "v2",
             **extra: Any) -> Callable[[Cell], Behaviour]:
    """`label`'s first run takes first_step_s per step (the host drifted), later runs
    then_step_s; every other image 1 ms."""
    seen: list[str] = []

    def behave(cell: Cell) -> Behaviour:
        if cell.image.label != label:
            return Behaviour()
        seen.append(cell.id)
        return Behaviour(step_s=first_step_s if len(seen) == 1 else then_step_s, **extra)

    return behave


def test_identical_images_that_drifted_once_are_not_a_regression(tmp_path: Path) -> None:
    # GIVEN v2 is v1 under another tag, but its cell ran while the host was 25 % slower
    matrix = make_matrix(tmp_path, "v1, v2")
    lines: list[str] = []
    out = run(matrix, FakeRuntime(drifting(0.00125, 0.001)), tmp_path, progress=lines.append)
    res = out.results["v2.gpu0.loop"]
    # THEN the pooled steps suspected it, the interleaved rounds did not confirm it
    assert res.vs_baseline.steps.direction == "slower"
    assert res.verdict == "ok" and res.vs_baseline.direction == "~"
    assert res.vs_baseline.confirmation.confirmed is False
    # AND the progress said "pending" first, after the cell's own time (this pass's
    # look at the demo: "vs baseline: pending in 0.4s" read as a wait of 0.4 s), and
    # gave the comparison its own line
    assert any("v2.gpu0.loop: ok within run" in x
               and re.search(r"\) in \d+\.\ds; vs baseline: pending$", x) for x in lines)
    assert any(x.startswith("v2.gpu0.loop vs v1: not confirmed") for x in lines)


def test_without_rounds_a_pooled_slowdown_is_only_suspected(tmp_path: Path) -> None:
    matrix = make_matrix(tmp_path, "v1, v2")
    path = tmp_path / "matrix.yaml"
    path.write_text(path.read_text().replace("repeats: 0", "repeats: 0, rounds: 0"))
    assert "rounds: 0" in path.read_text()
    matrix = matrixfile.load(path)
    runtime = FakeRuntime(by_image({"v2": Behaviour(step_s=0.002)}))
    out = run(matrix, runtime, tmp_path)
    res = out.results["v2.gpu0.loop"]
    assert res.verdict == "suspected" and "not confirmed (rounds: 0)" in res.reason
    assert "busy" not in res.reason
    assert len(runtime.runs) == 2 and out.bad == []


def test_without_rounds_a_pooled_slowdown_on_a_busy_host_says_the_host_was_busy(
        tmp_path: Path) -> None:
    # GIVEN no rounds, and the suspect run behind a run-queue delay of half its step time
    # (beside a loaded CI an A/A-like ujson pair read 1.3-2.4x pooled at p < 1e-58)
    matrix = make_matrix(tmp_path, "v1, v2")
    path = tmp_path / "matrix.yaml"
    path.write_text(path.read_text().replace("repeats: 0", "repeats: 0, rounds: 0"))
    matrix = matrixfile.load(path)
    runtime = FakeRuntime(by_image({"v2": Behaviour(step_s=0.002, rq_share=0.5)}))
    # WHEN it is swept
    res = run(matrix, runtime, tmp_path).results["v2.gpu0.loop"]
    # THEN the pooled change is still only suspected, and its reason says that the host
    # was busy, which the pooled p-value does not count
    assert res.verdict == "suspected", res.reason
    assert "not confirmed (rounds: 0); the host was busy (run-queue delay 50%" in res.reason
    assert "load can fake a change" in res.reason


def test_busy_rounds_are_replaced_and_named(tmp_path: Path) -> None:
    # GIVEN v2 truly 1.3x slower; its first confirmation run is on a busy host
    seen: list[int] = []

    def behave(cell: Cell) -> Behaviour:
        if cell.image.label != "v2":
            return Behaviour()
        seen.append(1)
        return Behaviour(step_s=0.0013, rq_share=0.8 if len(seen) == 2 else 0.0)

    out = run(make_matrix(tmp_path, "v1, v2"), FakeRuntime(behave), tmp_path)
    res = out.results["v2.gpu0.loop"]
    conf = res.vs_baseline.confirmation
    # (rounds stop once the interval clears the threshold: three usable rounds here)
    assert res.verdict == "regression" and conf.decided_by == [2, 3, 4]
    assert "left out: round 1 (host busy" in res.reason
    assert "4 rounds (8 runs) in " in res.reason and conf.seconds > 0


def test_a_slower_image_hidden_by_a_loaded_baseline_is_still_found(tmp_path: Path) -> None:
    # GIVEN v2 truly 1.3x slower, but v1's cell ran on a busy host at v2's speed
    seen: list[int] = []

    def behave(cell: Cell) -> Behaviour:
        if cell.image.label == "v2":
            return Behaviour(step_s=0.0013, rq_share=0.0)
        seen.append(1)
        first = len(seen) == 1
        return Behaviour(step_s=0.0013 if first else 0.001, rq_share=0.4 if first else 0.0)

    out = run(make_matrix(tmp_path, "v1, v2"), FakeRuntime(behave), tmp_path)
    res = out.results["v2.gpu0.loop"]
    # THEN the pooled steps saw nothing, but the busy baseline called for rounds
    assert res.vs_baseline.steps.direction == "~"
    assert res.verdict == "regression"
    assert 1.2 < res.vs_baseline.confirmation.ratio < 1.4


def test_a_busy_host_is_said_once_a_sweep(tmp_path: Path) -> None:
    # GIVEN every cell of four images ran with a third of its step time in the run queue
    lines: list[str] = []
    matrix = make_matrix(tmp_path, "v1, v2, v3, v4")
    out = run(matrix, FakeRuntime(lambda c: Behaviour(rq_share=0.3)), tmp_path,
              progress=lines.append)
    # THEN the three compared cells are confirmed in rounds, the host named busy once
    assert sum(line.startswith("host busy:") for line in lines) == 1
    confirming = [ln for ln in lines if "confirming in interleaved rounds" in ln]
    assert len(confirming) == 3
    assert all("(2 to 6, until settled)" in ln for ln in confirming)
    # AND each says what its rounds cost
    for cid in ("v2.gpu0.loop", "v3.gpu0.loop", "v4.gpu0.loop"):
        conf = out.results[cid].vs_baseline.confirmation
        assert conf is not None and f"{len(conf.rounds)} rounds" in conf.reason
        # identical images: two rounds below min_ratio settle it (were 3 to 6)
        assert len(conf.rounds) == 2 and out.results[cid].verdict == "ok", conf.reason


def test_a_no_change_line_names_the_threshold_that_held_it_back(tmp_path: Path) -> None:
    """Issue 21 point 3: the words match what was found — a pooled 0.95x at p=1e-69 is
    not 'not a significant change', it is within min_ratio."""
    lines: list[str] = []
    run(make_matrix(tmp_path, "v1, v2"), FakeRuntime(by_image(
        {"v1": Behaviour(step_s=0.001), "v2": Behaviour(step_s=0.00095)})), tmp_path,
        progress=lines.append)
    said = [ln for ln in lines if ln.startswith("v2.gpu0.loop vs v1: no change")]
    assert len(said) == 1, lines
    assert said[0].endswith("within min_ratio 1.1"), said
    assert "significant" not in said[0]


def test_unchanged_because_names_each_threshold() -> None:
    from harness.analysis.baseline import unchanged_because
    from harness.analysis.records import StepComparison
    from harness.thresholds import AnalysisConfig

    cfg = AnalysisConfig()
    assert unchanged_because(StepComparison(1.23, 0.3, "~"), cfg).startswith("not significant")
    assert unchanged_because(StepComparison(1.05, 1e-9, "~"), cfg) == "within min_ratio 1.1"
    assert "step floor (10 µs)" in unchanged_because(StepComparison(1.2, 1e-9, "~"),
                                                    AnalysisConfig(step_floor_s=1e-5))


def test_rounds_on_a_host_busy_throughout_stop_when_no_decision_is_left(
        tmp_path: Path) -> None:
    """Issue 21 point 7: on a host busy in every round, rounds stop once the rounds left
    cannot give two usable ones (5 of 6 here), and no back-off follows the last one:
    1 + 2 + 4 + 8 s of waits, not 1 + 2 + 4 + 8 + 8 + 8."""
    import threading

    waits: list[float] = []

    class Counting(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(timeout or 0.0)
            return False

    def behave(cell: Cell) -> Behaviour:
        # the sweep's own cells quiet, 1.3x apart; every confirmation run busy
        slow = 0.0013 if cell.image.label == "v2" else 0.001
        busy = cell.settings.iterations < 300
        return Behaviour(step_s=slow, rq_share=0.8 if busy else 0.0)

    matrix = make_matrix(tmp_path, "v1, v2")
    import harness.stages.orchestrator as orch

    real = orch.Sweep.__init__

    def init(self: orch.Sweep, *a: Any, **kw: Any) -> None:
        real(self, *a, **kw)
        self.ctx = dataclasses.replace(self.ctx, cancel=Counting())

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(orch.Sweep, "__init__", init)
        out = run(matrix, FakeRuntime(behave), tmp_path)
    conf = out.results["v2.gpu0.loop"].vs_baseline.confirmation
    assert conf is not None and len(conf.rounds) == 5, conf.reason
    assert all(r.excluded and r.excluded.startswith("host busy") for r in conf.rounds)
    assert waits == [1.0, 2.0, 4.0, 8.0], waits
    assert "0 usable round(s) of 5" in conf.reason and "5 rounds (10 runs)" in conf.reason
    # AND the cell is undecided, never ok (issue 61 point 5): no CPU time was recorded
    res = out.results["v2.gpu0.loop"]
    assert res.verdict == "ambiguous" and res.rule == "unsettled", res.reason
    assert "host busy: 5 of 5 confirmation rounds left out" in res.reason


def test_a_saved_runs_busy_rounds_back_off_as_a_sweeps_do(tmp_path: Path) -> None:
    """Issue 64: a saved run's rounds (`api.run`) are the sweep's loop, its busy
    back-off included, where a copy of the loop had none: every round busy, 1 + 2 + 4 +
    8 s of waits, five rounds of the suspect alone against the saved run."""
    from harness.api.run import against_saved
    from harness.stages.orchestrator import Sweep

    waits: list[float] = []

    class Counting(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(timeout or 0.0)
            return False

    def behave(cell: Cell) -> Behaviour:
        # the measured runs quiet, 1.3x apart; every confirmation run (shorter) busy
        slow = 0.0013 if cell.image.label == "v2" else 0.001
        return Behaviour(step_s=slow, rq_share=0.8 if cell.settings.iterations < 300 else 0.0)

    matrix = make_matrix(tmp_path, "v1, v2")
    v1, v2 = sorted(matrix.cells, key=lambda c: c.image.label)
    store = RunStore(tmp_path / "run", durable=False)
    lines: list[str] = []
    sweep = Sweep(matrix, FakeRuntime(behave), store, lines.append)
    sweep.ctx = dataclasses.replace(sweep.ctx, cancel=Counting())
    try:
        saved, measured = sweep.run_cell(v1), sweep.run_cell(v2)
        res = against_saved(sweep.ctx, v2, measured, saved.result, saved.series, "main (saved)")
    finally:
        sweep.images.close()
    vs = res.vs_baseline
    conf = vs.confirmation if vs is not None else None
    assert conf is not None and len(conf.rounds) == 5, res.reason
    assert all(r.excluded and r.excluded.startswith("host busy") for r in conf.rounds)
    assert waits == [1.0, 2.0, 4.0, 8.0], waits
    assert "5 rounds of this run against the saved one" in conf.reason, conf.reason
    assert sum("vs main (saved): round " in ln for ln in lines) == 5, lines
    # only the suspect runs again: the saved run's code is gone
    assert sorted(p.name for p in (store.cell_dir(v2.id) / "rounds").iterdir()) == [
        f"{k}-suspect" for k in range(1, 6)]


def busy_rounds(slow: dict[str, float], cpu_share: float | None) -> Callable[[Cell], Behaviour]:
    """The sweep's own cells quiet; every confirmation run (shorter) busy, waiting for a
    CPU 80-270 % of its step; CPU time per step `cpu_share` of the step (None: not
    recorded; 0: a step that waits, whose CPU time does not move)."""
    def behave(cell: Cell) -> Behaviour:
        step = slow.get(cell.image.label, 0.001)
        busy = cell.settings.iterations < 300
        cpu = None if cpu_share is None else (
            0.0002 if cpu_share == 0 else cpu_share * step * (0.2 if busy else 1.0))
        return Behaviour(step_s=step, rq_share=0.8 if busy else 0.0, cpu_s=cpu,
                         seed=len(cell.id))
    return behave


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The busy rounds' back-off waits cut short for the test."""
    import harness.stages.settle as confirm

    monkeypatch.setattr(confirm, "BACKOFF_S", 0.0)
    monkeypatch.setattr(confirm, "MAX_BACKOFF_S", 0.0)


@pytest.mark.parametrize("ratio", [10.0, 3.8])
def test_a_slowdown_whose_every_round_ran_busy_is_named_by_cpu_time(
        tmp_path: Path, ratio: float, no_backoff: None) -> None:
    """Issue 61 point 5: every confirmation round of a real slowdown ran on a busy host;
    its CPU time per step reads the same change as the wall clock, so the rounds count
    and name it, where before all were left out and the cell ended ok."""
    out = run(make_matrix(tmp_path, "v1, v2"), FakeRuntime(busy_rounds(
        {"v2": 0.001 * ratio}, cpu_share=0.9)), tmp_path)
    res = out.results["v2.gpu0.loop"]
    conf = res.vs_baseline.confirmation
    assert res.verdict == "regression", res.reason
    assert conf is not None and all(r.excluded is None for r in conf.rounds)
    assert all(r.cpu_ratio is not None and r.cpu_ratio > 1.3 for r in conf.rounds)


def test_a_small_change_every_round_busy_is_undecided(tmp_path: Path, no_backoff: None
                                                     ) -> None:
    # GIVEN 1.2x, every round busy: load inflates CPU time and the wall clock by tens of
    # percent (a 1.16x was confirmed beside a parallel test suite where a quiet run read
    # 1.0x): those rounds are left out, and the cell says it could not settle
    out = run(make_matrix(tmp_path, "v1, v2"), FakeRuntime(busy_rounds(
        {"v2": 0.0012}, cpu_share=0.9)), tmp_path)
    res = out.results["v2.gpu0.loop"]
    assert res.verdict == "ambiguous" and res.rule == "unsettled", res.reason


def test_identical_images_every_round_busy_stay_ok(tmp_path: Path, no_backoff: None) -> None:
    # GIVEN identical images, every round busy, CPU time recorded: no false alarm
    out = run(make_matrix(tmp_path, "v1, v2"), FakeRuntime(busy_rounds(
        {}, cpu_share=0.9)), tmp_path)
    assert out.results["v2.gpu0.loop"].verdict == "ok", out.results["v2.gpu0.loop"].reason


def test_a_waiting_slowdown_every_round_busy_is_undecided_exit_4(
        tmp_path: Path, no_backoff: None) -> None:
    # GIVEN a 10x slower step that waits (its CPU time did not move), every round busy:
    # load could make such a wait, so no round counts; the cell is undecided, exit 4
    from harness.errors import EXIT_UNDECIDED
    from harness.sweeping.course import exit_code

    out = run(make_matrix(tmp_path, "v1, v2"), FakeRuntime(busy_rounds(
        {"v2": 0.01}, cpu_share=0)), tmp_path)
    res = out.results["v2.gpu0.loop"]
    assert res.verdict == "ambiguous" and res.rule == "unsettled", res.reason
    assert "host busy" in res.reason and "sweep it again on a quieter host" in res.reason
    assert exit_code(Report.from_results("busy", out.results)) == EXIT_UNDECIDED


def test_both_runs_of_a_round_make_the_same_calls(tmp_path: Path) -> None:
    """A/A beside two busy loops (aa_sweeps.py): the pygments control, one venv as A and
    B, read `regression` 1.36x. Its step's cost varies with the call (a lexer module
    loaded every 10th call, 150 in turn), and each side's rounds ran its own least calls,
    from its own step time: 1,494 for the baseline, 1,000 for the suspect (replayed with
    every round kept: 1.28, 1.37, 1.11, 1.16, 0.99, 1.25). Both now make the more of the
    two: 1,619 and 1,619 there, 0.92-1.06."""
    calls: dict[str, list[int]] = {"v1": [], "v2": []}

    def behave(cell: Cell) -> Behaviour:
        calls[cell.image.label].append(cell.settings.agent_iterations)
        # v2's step twice v1's: a round of 0.1 s holds 500 of v1's calls, 250 of v2's
        return Behaviour(step_s=4e-4 if cell.image.label == "v2" else 2e-4)

    out = run(make_matrix(tmp_path, "v1, v2"), FakeRuntime(behave), tmp_path)
    conf = out.results["v2.gpu0.loop"].vs_baseline.confirmation
    assert conf is not None and len(conf.rounds) >= 2, out.results["v2.gpu0.loop"].reason
    # the first run of each is the cell's own (400 calls); then one a round
    base, suspect = calls["v1"][1:], calls["v2"][1:]
    assert len(base) == len(suspect) == len(conf.rounds)
    assert base == suspect and all(450 < n < 550 for n in base), calls
