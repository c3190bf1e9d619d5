"""Issue 35 item 5 (first half): no cell is measured while the same host pulls or builds
another cell's image. Proven over the fake runtime by the order of events: each
prepare and each run records when it started and ended."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from fakeruntime import Behaviour, FakeRuntime
from test_scheduler import make_matrix, run

from harness.matrixfile.model import ImageSpec
from harness.runtimes.base import ImageInfo, Progress, RunOutcome, RunRequest


@dataclass
class EventRuntime(FakeRuntime):
    """FakeRuntime whose prepare and run each take a while, and say when."""

    prepare_s: float = 0.06
    run_s: float = 0.06
    queues: bool = False
    events: list[tuple[str, str, str, float, float]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def queues_cells(self) -> bool:  # type: ignore[override]
        return self.queues

    def prepare(self, image: ImageSpec, progress: Progress) -> ImageInfo:
        start = time.monotonic()
        time.sleep(self.prepare_s)
        info = super().prepare(image, progress)
        self._say("prepare", "", image.label, start)
        return info

    def run(self, request: RunRequest, progress: Progress) -> RunOutcome:
        start = time.monotonic()
        outcome = super().run(request, progress)
        time.sleep(max(0.0, self.run_s - (time.monotonic() - start)))
        cell = request.cell
        self._say("run", cell.host.label, cell.image.label, start)
        return outcome

    def _say(self, what: str, host: str, label: str, start: float) -> None:
        with self._lock:
            self.events.append((what, host, label, start, time.monotonic()))


def overlapping(events: list[tuple[str, str, str, float, float]]) -> list[str]:
    prepares = [e for e in events if e[0] == "prepare"]
    runs = [e for e in events if e[0] == "run"]
    return [f"{p[2]} prepared while {r[2]} ran" for p in prepares for r in runs
            if p[3] < r[4] and r[3] < p[4]]


def test_no_image_is_prepared_while_a_cell_is_measured(tmp_path: Path) -> None:
    # GIVEN four images, each prepared for a while, and CPU cells (one lane)
    matrix = make_matrix(tmp_path, images=4, gpus=["none"])
    runtime = EventRuntime(lambda cell: Behaviour())
    # WHEN they are swept
    outcome = run(matrix, runtime)
    # THEN every cell ran, every image was prepared once, and no prepare overlapped a run
    assert len(outcome.results) == 4 and sorted(runtime.prepared) == ["v0", "v1", "v2", "v3"]
    assert overlapping(runtime.events) == []
    # AND each image was ready before its cell ran (prepared in run order)
    order = [(e[0], e[2]) for e in sorted(runtime.events, key=lambda e: e[3])]
    for label in ("v0", "v1", "v2", "v3"):
        assert order.index(("prepare", label)) < order.index(("run", label))


def test_gpu_lanes_of_one_host_never_measure_beside_a_prepare(tmp_path: Path) -> None:
    # GIVEN two GPU lanes of one host, running at once
    matrix = make_matrix(tmp_path, images=3, gpus=[0, 1])
    runtime = EventRuntime(lambda cell: Behaviour())
    outcome = run(matrix, runtime)
    # THEN no prepare overlapped any run, and the sweep finished (no lane waits forever)
    assert len(outcome.results) == 6
    assert overlapping(runtime.events) == []


def test_a_cluster_runtime_prepares_ahead(tmp_path: Path) -> None:
    # GIVEN a runtime that queues cells (they run on other machines)
    matrix = make_matrix(tmp_path, images=3, gpus=["none"])
    runtime = EventRuntime(lambda cell: Behaviour(), queues=True)
    outcome = run(matrix, runtime)
    # THEN its images are prepared while cells run (the wait is for one host only)
    assert len(outcome.results) == 3
    assert overlapping(runtime.events) != []


def test_a_cell_whose_image_is_not_ready_says_it_is_prepared_first(tmp_path: Path) -> None:
    """Issue 79 item 13: on a cold cache every venv build printed under `[1/2] CELL:
    running (...)`, as if the cell ran while its venv was built."""
    import sweepkit

    said: list[str] = []
    asked = threading.Event()

    class Slow(FakeRuntime):
        """The first image is ready only once its cell's line was said."""

        def prepare(self, image: ImageSpec, progress: Progress) -> ImageInfo:
            if image.label == "a":
                asked.wait(10)
            return super().prepare(image, progress)

    def progress(line: str) -> None:
        said.append(line)
        if line.startswith("[1/1] a."):
            asked.set()

    matrix = sweepkit.write_matrix(tmp_path, [{"name": "a", "pip": ["demo==1"]}])
    sweepkit.sweep_matrix(matrix, Slow(lambda c: Behaviour()), progress=progress)
    assert said[0] == ("[1/1] a.gpu0.loop: preparing its environment (a venv), then running "
                       "(300 calls)"), said
