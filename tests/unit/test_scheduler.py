"""The per-GPU scheduler: lanes and max-parallel, proven with a runtime that records when
each cell held its GPU. One cell per GPU at a time, cells spread across the matrix's
GPUs, max-parallel honoured, CPU-only cells alongside, hosts independent."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fakeruntime import Behaviour, FakeRuntime
from sweepkit import DEFAULTS, sweep_matrix, write_matrix

from harness import matrixfile
from harness.runtimes.base import Progress, RunOutcome, RunRequest, Runtime
from harness.stages.orchestrator import SweepOutcome, lanes


@dataclass
class Held:
    host: str
    gpu: str
    start: float
    end: float


# How long a cell waits in run() for the others `TimedRuntime.together` asks for: only a
# scheduler that never lets them run at once waits it out (once: later cells go on).
PATIENCE_S = 60.0


@dataclass
class TimedRuntime(FakeRuntime):
    """FakeRuntime whose run() holds the cell's GPU for `hold_s` and records when, and
    counts the cells inside run() at once (`peak`). With `together` N, a cell waits in
    run() until N cells have been in it at once (or `PATIENCE_S`, once): whether the
    scheduler lets N run together then does not hang on which lane thread a busy host
    ran first (at a load of 13-17 on 2 cores, a lane's 50 ms cells and the decisions
    between them drifted apart, and no instant had all four GPUs' cells in run())."""

    hold_s: float = 0.05
    together: int = 0
    held: list[Held] = field(default_factory=list)
    peak: int = 0
    _inside: int = 0
    _gave_up: bool = False
    _lock: threading.Condition = field(default_factory=threading.Condition)

    def run(self, request: RunRequest, progress: Progress) -> RunOutcome:
        start = time.monotonic()
        with self._lock:
            self._inside += 1
            self.peak = max(self.peak, self._inside)
            self._lock.notify_all()
            if self.together and not self._lock.wait_for(
                    lambda: self.peak >= self.together or self._gave_up, PATIENCE_S):
                self._gave_up = True
                self._lock.notify_all()
        try:
            outcome = super().run(request, progress)
            time.sleep(max(0.0, self.hold_s - (time.monotonic() - start)))
        finally:
            with self._lock:
                self._inside -= 1
                self.held.append(Held(request.cell.host.label, request.cell.gpu.value,
                                      start, time.monotonic()))
        return outcome


def timed(hold_s: float = 0.05, together: int = 0) -> TimedRuntime:
    return TimedRuntime(lambda cell: Behaviour(), hold_s=hold_s, together=together)


def make_matrix(tmp_path: Path, images: int, gpus: list[Any], runtime: str = "local",
                **top: Any) -> Path:
    return write_matrix(tmp_path, [f"v{i}" if runtime == "local" else f"img/v:{i}"
                                   for i in range(images)], name="sched", gpus=gpus,
                        runtime=runtime, defaults={**DEFAULTS, "iterations": 40,
                                                   "warmup": 0}, **top)


def run(path: Path, runtime: Runtime, runtimes: dict[str, Runtime] | None = None
        ) -> SweepOutcome:
    return sweep_matrix(path, runtime, runtimes=runtimes).outcome


def max_concurrent(held: list[Held]) -> int:
    events = sorted([(h.start, 1) for h in held] + [(h.end, -1) for h in held])
    now = peak = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def overlaps(a: Held, b: Held) -> bool:
    return a.start < b.end and b.start < a.end


def assert_one_cell_per_gpu(held: list[Held]) -> None:
    for i, a in enumerate(held):
        for b in held[i + 1:]:
            same_gpu = (a.host, a.gpu) == (b.host, b.gpu)
            all_vs_gpu = (a.host == b.host and "all" in (a.gpu, b.gpu)
                          and "none" not in (a.gpu, b.gpu))
            if same_gpu or all_vs_gpu:
                assert not overlaps(a, b), f"two cells on GPU {a.gpu} of {a.host} at once"


def test_lanes_group_by_host_and_gpu(tmp_path: Path) -> None:
    path = make_matrix(tmp_path, images=3, gpus=[0, 1, "none"])
    groups = lanes(list(matrixfile.load(path).cells))
    assert [[c.id for c in g] for g in groups] == [
        [f"v{i}.gpu0.loop" for i in range(3)], [f"v{i}.gpu1.loop" for i in range(3)],
        [f"v{i}.cpu.loop" for i in range(3)]]


def test_one_cell_per_gpu_and_spread_across_gpus(tmp_path: Path) -> None:
    path = make_matrix(tmp_path, images=3, gpus=[0, 1, 2, 3])
    rt = timed(together=4)
    outcome = run(path, rt)
    assert outcome.ran == 12 and len(rt.held) == 12
    assert_one_cell_per_gpu(rt.held)
    # every GPU busy at once: four cells inside run() together, as the runtime counted
    # them (a scheduler that ran three at most would leave them waiting PATIENCE_S)
    assert rt.peak == 4 and max_concurrent(rt.held) == 4
    # wall time vs cells/N is measured by benchmarks/scheduler.py, not asserted here


def test_max_parallel_is_honoured(tmp_path: Path) -> None:
    path = make_matrix(tmp_path, images=2, gpus=[0, 1, 2, 3], **{"max-parallel": 2})
    rt = timed()
    run(path, rt)
    assert len(rt.held) == 8
    assert_one_cell_per_gpu(rt.held)
    assert max_concurrent(rt.held) == 2


def test_max_parallel_one_is_serial(tmp_path: Path) -> None:
    path = make_matrix(tmp_path, images=2, gpus=[0, 1], **{"max-parallel": 1})
    rt = timed(0.02)
    run(path, rt)
    assert max_concurrent(rt.held) == 1


def test_cpu_cells_run_alongside_gpu_cells(tmp_path: Path) -> None:
    path = make_matrix(tmp_path, images=3, gpus=[0, "none"])
    rt = timed()
    run(path, rt)
    cpu = [h for h in rt.held if h.gpu == "none"]
    gpu0 = [h for h in rt.held if h.gpu == "0"]
    assert len(cpu) == len(gpu0) == 3
    assert any(overlaps(c, g) for c in cpu for g in gpu0)
    assert_one_cell_per_gpu(rt.held)


def test_hosts_run_the_same_gpu_index_at_once(tmp_path: Path) -> None:
    path = make_matrix(tmp_path, images=2, gpus=[0], runtime="docker",
                       hosts=[{"name": "box3090", "url": "unix:///a.sock"},
                              {"name": "box4090", "url": "unix:///b.sock"}])
    per_host = {"box3090": timed(), "box4090": timed()}
    outcome = run(path, per_host["box3090"], dict(per_host))
    assert outcome.ran == 4
    for label, rt in per_host.items():
        assert {h.host for h in rt.held} == {label} and len(rt.held) == 2
    held = per_host["box3090"].held + per_host["box4090"].held
    assert_one_cell_per_gpu(held)
    assert max_concurrent(held) == 2


def test_all_gpus_cell_never_overlaps_a_single_gpu_cell(tmp_path: Path) -> None:
    path = make_matrix(tmp_path, images=2, gpus=[0, "all"])
    rt = timed()
    run(path, rt)
    assert_one_cell_per_gpu(rt.held)
