"""Issue 51, "GPU answers": every planned cell of every `gpu:` selection gets a result.

A model over generated `gpu:` values (an index, `all`, `none`, a list mixing them, or no
axis at all) on a simulated host of 1, 2 or 4 GPUs: the expanded matrix is swept on the
fake runtime, whose engine shows that many GPUs. Spread cells and `gpu: all` cells run
in two waves (`stages.orchestrator.plan`); the first wave ending must not stop the second (it
did: `[0, 1, all]` on 2 GPUs ran 4 of 6 cells and exited 4). An index the host lacks is
what the GPU precheck makes of it: a not-applicable result, not a missing cell.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from fakeruntime import Behaviour, FakeRuntime
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sweepkit import DEFAULTS, sweep_matrix, write_matrix

from harness import matrixfile
from harness.errors import EXIT_OK, EXIT_UNDECIDED
from harness.gpu.host import Gpu, HostGpus
from harness.matrixfile.model import Cell
from harness.stages.orchestrator import plan, run_lanes
from harness.sweeping.course import exit_code

NOT_APPLICABLE = "not-applicable"
ABSENT = object()   # no `gpu:` axis (the matrix's default, "none")


@dataclass
class GpuHost(FakeRuntime):
    """The fake runtime on a host whose engine shows `count` GPUs."""

    count: int = 1

    def gpu_inventory(self, image: str, python: str = "python3") -> HostGpus:
        return HostGpus(driver="535.129.03", cuda_driver=(12, 2), gpus=[
            Gpu(i, "NVIDIA H100", f"GPU-{i:08x}-0000-0000-0000-000000000000", (9, 0),
                80 << 30) for i in range(self.count)])


ENTRY = st.one_of(st.integers(min_value=0, max_value=4), st.sampled_from(["all", "none"]))
SELECTION = st.one_of(
    st.just(ABSENT), ENTRY,
    st.lists(ENTRY, min_size=1, max_size=4, unique_by=str))


def sweep_selection(where: Path, selection: Any, host_gpus: int, images: int) -> None:
    gpus = None if selection is ABSENT else (
        selection if isinstance(selection, list) else [selection])
    path = write_matrix(where, [f"v{i}" for i in range(images)], name="waves", gpus=gpus,
                        defaults=DEFAULTS)
    if gpus is not None and not isinstance(selection, list):   # `gpu: 0`, not `[0]`
        doc = yaml.safe_load(path.read_text())
        doc["matrix"]["gpu"] = selection
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
    rt = GpuHost(lambda cell: Behaviour(), count=host_gpus)
    run = sweep_matrix(path, rt, plan=True)
    planned = {c.id for c in run.cells}
    wanted = {str(g) for g in gpus} if gpus is not None else {"none"}
    assert {c.gpu.value for c in run.cells} == wanted
    # Every planned cell of every wave has a result: none missing, none run twice.
    assert set(run.results) == planned, f"missing: {sorted(planned - set(run.results))}"
    assert len(rt.runs) == len(set(rt.runs)), rt.runs
    for c in run.cells:
        beyond = c.gpu.value.isdigit() and int(c.gpu.value) >= host_gpus
        verdict = run.results[c.id].verdict
        assert (verdict == NOT_APPLICABLE) == beyond, (c.id, verdict)
        assert (c.id in rt.runs) == (not beyond), c.id   # not-applicable: never run
    report = run.report()
    assert report.missing_cells == []
    assert report.undecided_cells == []
    # Clean cells, and not-applicable ones for GPUs the host lacks: a whole answer.
    assert exit_code(report) == EXIT_OK != EXIT_UNDECIDED


@pytest.mark.parametrize("selection, host_gpus", [([0, 1, "all"], 2), ([0, 1, 2, 3, "all"], 4),
                                                  (["all", 0, "none"], 1)])
def test_the_all_wave_runs_after_the_spread_wave(tmp_path: Path, selection: list[Any],
                                                 host_gpus: int) -> None:
    sweep_selection(tmp_path, selection, host_gpus, images=2)


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(selection=SELECTION, host_gpus=st.sampled_from([1, 2, 4]),
       images=st.integers(min_value=1, max_value=2))
@example(selection=[0, 1, "all"], host_gpus=2, images=1)
@example(selection=[0, 4, "all", "none"], host_gpus=2, images=2)
def test_every_planned_cell_of_a_gpu_selection_gets_a_result(
        tmp_path_factory: pytest.TempPathFactory, selection: Any, host_gpus: int,
        images: int) -> None:
    sweep_selection(tmp_path_factory.mktemp("waves"), selection, host_gpus, images)


@pytest.mark.parametrize("width", [1, None])
def test_a_wave_that_ends_leaves_stop_and_cancel_unset(tmp_path: Path,
                                                       width: int | None) -> None:
    """Serial (width 1) or in parallel: the next wave sees `stop` as this one left it."""
    path = write_matrix(tmp_path, ["v0", "v1"], gpus=[0, 1, "all"])
    waves = plan(list(matrixfile.load(path).cells), queues_cells=False)
    stop, cancel, ran = threading.Event(), threading.Event(), []

    def lane(cells: list[Cell]) -> None:
        for c in cells:
            if not stop.is_set():
                ran.append(c.id)

    for groups in waves:
        run_lanes(groups, lane, width, stop, cancel)
        assert not stop.is_set() and not cancel.is_set()
    assert len(ran) == 6


@pytest.mark.parametrize("width", [1, None])
def test_a_lane_that_raises_stops_every_lane_and_cancels(tmp_path: Path,
                                                         width: int | None) -> None:
    path = write_matrix(tmp_path, ["v0"], gpus=[0, 1])
    groups = plan(list(matrixfile.load(path).cells), queues_cells=False)[0]
    stop, cancel = threading.Event(), threading.Event()

    def lane(cells: list[Cell]) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_lanes(groups, lane, width, stop, cancel)
    assert stop.is_set() and cancel.is_set()
