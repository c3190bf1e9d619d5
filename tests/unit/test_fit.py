"""`harness fit`: the driver over FakeRuntime (memory per param), the `fit:` block, the CLI."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest
from fakeruntime import Behaviour, FakeRuntime

from harness import matrixfile
from harness.cli import main
from harness.errors import SpecError
from harness.fit import (
    FitReport,
    Target,
    first_smaller,
    fit_row,
    predicted_boundary,
    store_cache,
    sweep_runner,
)
from harness.matrixfile.model import Cell, Matrix
from harness.stages.orchestrator import Sweep
from harness.store import RunStore

SCENARIO = "def setup(params):\n    return None\n\n\ndef step(state):\n    pass\n"
MiB = 1 << 20
LIMIT = 1 << 30
TF_OOM = ("OOM when allocating tensor with shape[9,32,128,128] and type float on "
          "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n"
          "Sum Total of in-use chunks: 1.00GiB\n"
          "Hint: If you want to see a list of allocated tensors when OOM happens, add "
          "report_tensor_allocations_upon_oom to RunOptions for current allocation info.")


def make_matrix(tmp: Path, images: int = 1, extra: str = "") -> Matrix:
    (tmp / "net.py").write_text(SCENARIO)
    names = ", ".join(f"{{name: v{i}}}" for i in range(images))
    (tmp / "m.yaml").write_text(
        "name: fitm\nruntime: local\n"
        "defaults: {iterations: 40, warmup: 5, sample_every: 2, repeats: 2, mem_limit: 1g}\n"
        f"matrix:\n  image: [{names}]\n  gpu: [none]\n"
        "  scenario: [{script: net.py, params: {batch: 1}}]\n" + extra)
    return matrixfile.load(tmp / "m.yaml")


def memory(per_unit: Callable[[Cell], float], fixed: float = 300 * MiB,
           fail: str = "oom") -> Callable[[Cell], Behaviour]:
    """A cell's peak is fixed + per_unit * batch; above the limit it fails as `fail`."""
    def behave(cell: Cell) -> Behaviour:
        peak = fixed + per_unit(cell) * int(cell.scenario.params["batch"])
        if peak <= LIMIT:
            return Behaviour(base_bytes=peak)
        errors = {"crash": "std::bad_alloc", "tf": TF_OOM}
        return Behaviour(base_bytes=peak, oom=fail == "oom", error=errors.get(fail))

    return behave


def truth(per_unit: float, fixed: float = 300 * MiB) -> int:
    return math.floor((LIMIT - fixed) / per_unit)


def test_driver_finds_the_boundary_and_predicts_it(tmp_path: Path) -> None:
    # GIVEN 300 MiB + 50 MiB per sample under a 1 GiB limit (boundary 14)
    matrix = make_matrix(tmp_path)
    runtime = FakeRuntime(memory(lambda c: 50 * MiB))
    store = RunStore(tmp_path / "s")
    sweep = Sweep(matrix, runtime, store, lambda _: None)
    said: list[str] = []
    # WHEN fitted through Sweep.run_cell
    row = fit_row(matrix.cells[0], Target("batch", 1, 64), sweep_runner(sweep), said.append,
                  store_cache(sweep))
    # THEN the boundary, within the bound, each probe its own cell with repeats off
    assert row.found and row.max_fit == truth(50 * MiB) == 14
    assert row.runs == len(runtime.runs) <= row.bound == 9
    assert all(r.startswith("v0.cpu.net.batch") for r in runtime.runs)
    assert store.load_cell("v0.cpu.net.batch14") is not None
    assert row.probes[14].result.settings["repeats"] == 0
    assert row.first_fail is not None and row.first_fail.value == 15
    assert row.first_fail.result.verdict == "oom"
    # the fitted per-sample memory and the prediction, within 10 %
    line = row.lines()["rss"]
    assert line.per_unit == pytest.approx(50 * MiB, rel=0.01)
    assert line.fixed == pytest.approx(300 * MiB, rel=0.02)
    assert predicted_boundary(row) == 14
    assert said[0].startswith("v0.cpu.net batch=1 [doubling, run 1/9]: ")
    # WHEN fitted again over the same store THEN every probe is reused, none run
    again = FakeRuntime(memory(lambda c: 50 * MiB))
    sweep2 = Sweep(matrix, again, store, lambda _: None)
    row2 = fit_row(matrix.cells[0], Target("batch", 1, 64), sweep_runner(sweep2),
                   lambda _: None, store_cache(sweep2))
    assert again.runs == [] and row2.max_fit == 14 and row2.reused == row.runs


def test_a_crash_is_not_called_out_of_memory(tmp_path: Path) -> None:
    matrix = make_matrix(tmp_path)
    sweep = Sweep(matrix, FakeRuntime(memory(lambda c: 100 * MiB, fail="crash")),
                  RunStore(tmp_path / "s"), lambda _: None)
    row = fit_row(matrix.cells[0], Target("batch", 1, 32), sweep_runner(sweep), lambda _: None)
    assert row.max_fit == truth(100 * MiB) == 7
    assert row.first_fail is not None and row.first_fail.outcome == "crash"
    assert row.sentence() == "fits 7 (8: crash)"


def test_the_framework_account_at_the_first_failure(tmp_path: Path) -> None:
    # GIVEN a framework that raises its own out-of-memory with an allocation report
    matrix = make_matrix(tmp_path)
    sweep = Sweep(matrix, FakeRuntime(memory(lambda c: 100 * MiB, fail="tf")),
                  RunStore(tmp_path / "s"), lambda _: None)
    row = fit_row(matrix.cells[0], Target("batch", 1, 16), sweep_runner(sweep), lambda _: None)
    # THEN it is an oom, and its report's top entries are the row's account
    assert row.sentence() == "fits 7 (8: oom)"
    top = row.allocation_top()
    assert top[0].startswith("OOM when allocating tensor with shape[9,32,128,128]")
    assert "Sum Total of in-use chunks: 1.00GiB" in top


def test_nothing_fits_and_everything_fits(tmp_path: Path) -> None:
    matrix = make_matrix(tmp_path)
    sweep = Sweep(matrix, FakeRuntime(memory(lambda c: 2000 * MiB)), RunStore(tmp_path / "a"),
                  lambda _: None)
    row = fit_row(matrix.cells[0], Target("batch", 1, 8), sweep_runner(sweep), lambda _: None)
    assert row.found and row.max_fit is None and row.step.fits == 0
    assert row.sentence() == "nothing fits: batch=1 is oom"
    sweep = Sweep(matrix, FakeRuntime(memory(lambda c: 1 * MiB)), RunStore(tmp_path / "b"),
                  lambda _: None)
    row = fit_row(matrix.cells[0], Target("batch", 1, 8), sweep_runner(sweep), lambda _: None)
    assert row.max_fit == 8 and row.sentence() == "fits 8 (the whole range)"


def test_first_smaller_is_beyond_one_step(tmp_path: Path) -> None:
    # GIVEN v1 needs 70 MiB per sample (fits 10), v0 and v2 need 50 (fits 14), v3 52 (13)
    matrix = make_matrix(tmp_path, images=4)
    units = {"v0": 50, "v1": 70, "v2": 50, "v3": 52}
    sweep = Sweep(matrix, FakeRuntime(memory(lambda c: units[c.image.label] * MiB)),
                  RunStore(tmp_path / "s"), lambda _: None)
    rows = [fit_row(c, Target("batch", 1, 64), sweep_runner(sweep), lambda _: None)
            for c in matrix.cells]
    assert [r.max_fit for r in rows] == [14, 10, 14, 13]
    pair = first_smaller(rows)
    assert pair is not None and pair[1].cell.image.label == "v1"
    # one step lower is noise
    assert first_smaller([rows[2], rows[3]]) is None


# ---------------------------------------------------------------- matrix `fit:` block
@pytest.mark.parametrize(("block", "where", "problem"), [
    ("fit: {param: batch}", "fit", "missing key 'fit.range'"),
    ("fit: {param: batch, range: 64..1}", "fit.range", "bad range '64..1'"),
    ("fit: {param: batch, range: one..two}", "fit.range", "bad range"),
    ("fit: {param: batch, range: 1..8, step: 2}", "fit.step", "unknown key 'step'"),
    ("fit: {param: 3, range: 1..8}", "fit.param", "param must be a name"),
])
def test_fit_block_errors_name_file_line_and_key(tmp_path: Path, block: str, where: str,
                                                 problem: str) -> None:
    with pytest.raises(SpecError) as err:
        make_matrix(tmp_path, extra=block + "\n")
    assert err.value.path == where and err.value.line == 8
    assert problem in err.value.problem and str(err.value).startswith(str(tmp_path / "m.yaml"))


def test_fit_block_rejects_a_param_set_to_a_word(tmp_path: Path) -> None:
    (tmp_path / "net.py").write_text(SCENARIO)
    (tmp_path / "m.yaml").write_text(
        "runtime: local\nmatrix:\n  image: [python3]\n"
        "  scenario: [{script: net.py, params: {batch: big}}]\n"
        "fit: {param: batch, range: [1, 8]}\n")
    with pytest.raises(SpecError, match="sets batch to 'big', not a whole number"):
        matrixfile.load(tmp_path / "m.yaml")


def test_fit_block_is_read(tmp_path: Path) -> None:
    m = make_matrix(tmp_path, extra="fit: {param: batch, range: [2, 32]}\n")
    assert m.fit is not None and (m.fit.param, m.fit.lo, m.fit.hi) == ("batch", 2, 32)


# ---------------------------------------------------------------- CLI
@pytest.fixture
def fake_cli(monkeypatch: pytest.MonkeyPatch) -> list[FakeRuntime]:
    made: list[FakeRuntime] = []
    units = {"v0": 50, "v1": 70}

    def get_runtime(name: str, docker_host: str | None = None) -> FakeRuntime:
        made.append(FakeRuntime(memory(lambda c: units[c.image.label] * MiB)))
        return made[-1]

    monkeypatch.setattr("harness.runtimes.get_runtime", get_runtime)
    return made


def test_cli_fit_names_the_first_smaller_image(tmp_path: Path, fake_cli: list[FakeRuntime],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    make_matrix(tmp_path, images=2, extra="fit: {param: batch, range: 1..64}\n")
    argv = ["fit", str(tmp_path / "m.yaml"), "--out", str(tmp_path / "r"), "-q"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "fit batch in 1..64 over 2 row(s): at most 9 probes per row" in out
    assert "v1 fits batch=10, v0 fits 14 on cpu.net: first smaller: v1" in out
    assert "rss: fixed 300 MiB + 50 MiB per batch" in out
    root = tmp_path / "r" / "fitm" / "fit-batch"
    data = json.loads((root / "fit.json").read_text())
    assert [r["max_fit"] for r in data["rows"]] == [14, 10]
    assert data["rows"][0]["prediction"]["boundary"] == 14
    assert data["first_smaller"][0]["image"] == "v1"
    assert "| cpu.net | fits 14 (15: oom) | fits 10 (11: oom) |" in (root / "fit.md").read_text()
    html = (root / "fit.html").read_text()
    assert html.count("<svg") == 2 and ">batch</text>" in html
    # --param overrides the block; a second run reuses every probe
    assert main([*argv, "--param", "batch=1..64"]) == 1
    assert fake_cli[1].runs == []


@pytest.mark.parametrize(("extra", "message"), [
    ([], "nothing to fit; pass --param NAME=LO..HI"),
    (["--param", "batch"], "--param batch: expected NAME=LO..HI"),
    (["--param", "batch=9..2"], "--param batch=9..2: expected NAME=LO..HI"),
    (["--param", "bad-name=1..4"], "'bad-name' is not a param name"),
])
def test_cli_fit_bad_input(tmp_path: Path, fake_cli: list[FakeRuntime], extra: list[str],
                           message: str, capsys: pytest.CaptureFixture[str]) -> None:
    make_matrix(tmp_path)
    assert main(["fit", str(tmp_path / "m.yaml"), "--out", str(tmp_path / "r"), *extra]) == 2
    assert message in capsys.readouterr().err
    assert fake_cli == []


# ---------------------------------------------------------------- only the cell's numbers
def fitted(tmp: Path, behave: Callable[[Cell], Behaviour], runtime: str = "local",
           hi: int = 64) -> str:
    """The console text of one row fitted over a FakeRuntime called `runtime`."""
    tmp.mkdir(parents=True, exist_ok=True)
    matrix = make_matrix(tmp)
    sweep = Sweep(matrix, FakeRuntime(behave, name=runtime), RunStore(tmp / runtime),
                  lambda _: None)
    row = fit_row(matrix.cells[0], Target("batch", 1, hi), sweep_runner(sweep), lambda _: None)
    return FitReport.from_rows([row]).console()


def with_cgroup(behave: Callable[[Cell], Behaviour]) -> Callable[[Cell], Behaviour]:
    """The agent also reads a cgroup: 6 GiB of the session's besides the cell's memory."""
    return lambda cell: dataclasses.replace(behave(cell), cgroup_bytes=6 * 1024 * MiB)


def test_fit_on_the_local_runtime_shows_no_cgroup_line(tmp_path: Path) -> None:
    # GIVEN the agent reading a cgroup that holds the whole session (local runtime)
    behave = with_cgroup(memory(lambda c: 50 * MiB))
    text = fitted(tmp_path, behave, "local")
    # THEN fit neither shows nor fits it as the cell's; the cell's own lines stand
    assert "cgroup" not in text, text
    assert "rss: fixed 300 MiB + 50 MiB per batch" in text
    # AND a runtime that gives each cell its cgroup (docker) shows that line
    own = fitted(tmp_path, behave, "docker")
    assert "cgroup: fixed 6.29 GiB + 50 MiB per batch" in own, own


def test_a_negative_fixed_part_is_never_printed_as_memory(tmp_path: Path) -> None:
    # GIVEN memory that grows faster than one line (5 MiB x batch^2 over 10 MiB): the
    # straight line through the fitting probes has its intercept below zero
    text = fitted(tmp_path, memory(lambda c: 5 * MiB * int(c.scenario.params["batch"]),
                                   fixed=10 * MiB))
    # THEN no memory line shows a negative fixed part; it says it is not resolved
    assert "fixed -" not in text and "-" not in text.split("rss:")[1].split("\n")[0], text
    assert "per batch, fixed part not resolved (the fit's intercept is below zero: the " \
           "line through the probes is under 0 bytes below batch=" in text, text


def test_a_probe_that_ran_says_runs(tmp_path: Path) -> None:
    # GIVEN probes that run (some with a leak the within-run analysis finds)
    text = fitted(tmp_path, memory(lambda c: 50 * MiB))
    probes = next(ln for ln in text.splitlines() if "probes (" in ln)
    # THEN each says fit's answer: runs, or how it failed
    assert "1:runs" in probes and "15:oom" in probes, probes
    assert not any(v in probes for v in (":ok", ":ambiguous", ":plateau")), probes
    leaky = fitted(tmp_path / "leak", lambda c: dataclasses.replace(
        memory(lambda c: 50 * MiB)(c), leak_per_iter=64 * 1024))
    probes = next(ln for ln in leaky.splitlines() if "probes (" in ln)
    assert "1:runs (leak)" in probes, probes
