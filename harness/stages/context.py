"""What every stage is given: the `Context` of services (`ImagePool`, `GpuFacts`,
`Runner`), the values a cell carries (`CellRun`, `Measured`, `RoundsPlan`), and the one
place a stage asks for a verdict (`verdict`).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import gpu
from harness.analysis.records import human_seconds
from harness.matrixfile.model import BUDGET_MIN_CALLS, Cell, Matrix
from harness.protocol.ingest import read_samples
from harness.protocol.series import Series
from harness.result.codec import JSON, as_json
from harness.result.model import Attempt, CellResult, Unavailable
from harness.runtimes.base import ImageInfo, Progress, RunOutcome, RunRequest, Runtime
from harness.store.results import RunStore, SeriesCache
from harness.thresholds import AnalysisConfig

if TYPE_CHECKING:
    from harness.analysis.decision import CellVerdict
    from harness.analysis.records import Baseline
    from harness.analysis.sequential import Watched


@dataclass(frozen=True)
class Context:
    """The narrow services the stages use; a stage never calls back up to the sweep."""

    matrix: Matrix              # its file (scripts named relative to it) and name
    cfg: AnalysisConfig         # thresholds for every decision
    store: RunStore             # where cells and rounds write
    progress: Progress          # one line per event
    images: ImagePool           # each cell's image, prepared once per host
    gpus: GpuFacts              # the hosts' GPUs, probed once
    runtime_for: Callable[[Cell], Runtime]   # the runtime (host) that runs a cell
    series: SeriesCache         # each cell's samples, parsed once
    runner: Runner              # runs a cell's agent once: every run goes through it
    cancel: threading.Event     # set on Ctrl-C (the runner's too)
    busy_said: threading.Event = field(default_factory=threading.Event)  # said once


@dataclass(frozen=True)
class Measured:
    """A cell that ran (or could not), held until its row's comparison is known."""

    result: CellResult
    verdict: CellVerdict
    series: Series
    home: Path                  # the cell's directory (`cells/<id>/`)
    info: ImageInfo             # its image, as prepared


@dataclass(frozen=True)
class Runs:
    """Who runs in a comparison's rounds: the suspect, and the baseline cell or samples."""

    suspect: Cell
    base: Cell | Series
    calls: int              # the calls that set the rounds' length (`settle.round_length`)
    home: Path              # the suspect's directory: its rounds run in home/rounds/
    info: ImageInfo         # the suspect's image


@dataclass(frozen=True)
class RoundsPlan:
    """The rounds a comparison needs before it can decide: the pooled comparison that
    left the doubt, who runs (`runs`; None: `--reanalyze` recalls recorded rounds), and
    the most (`cap`; None for a leak) and least calls a round's run makes."""

    res: CellResult             # the suspect's within-run result
    within: CellVerdict
    pooled: Baseline
    label: str                  # the baseline's name in progress lines
    runs: Runs | None
    cap: int | None
    # The least calls both runs of a round make: the more of the two sides'
    # `settle.least_calls`, the same on both sides (a cost that varies with the call read
    # over runs of different lengths reads as a change)
    least: int = 0


@dataclass
class CellRun:
    """One cell on its way through the stages; one that sets `verdict` ends the way."""

    cell: Cell                        # as the matrix asks for it
    started: float = field(default_factory=time.monotonic)
    run_cell: Cell | None = None      # as it is run (shortened, lengthened)
    info: ImageInfo | None = None
    outdir: Path | None = None        # the cell's directory, emptied for this run
    runtime: str | None = None        # the name of the runtime that ran it
    wait_s: float = 0.0               # waiting for the image
    t0: float = 0.0                   # when the image was ready
    precheck: tuple[str, str] | None = None
    ended: RunOutcome = field(default_factory=lambda: RunOutcome(exit_code=None))
    series: Series = field(default_factory=Series)
    verdict: CellVerdict | None = None
    attempts: list[Attempt] = field(default_factory=list)
    run_s: float = 0.0
    analyse_s: float = 0.0
    unavailable: Unavailable | None = None
    engine_retries: int = 0           # attempts the engine lost (never a repeat)

    @property
    def running(self) -> Cell:
        return self.run_cell or self.cell

    @property
    def repeats_used(self) -> int:
        """Attempts that ran and were decided: an engine lost mid-run spends no repeat."""
        return len(self.attempts) - self.engine_retries


# CellFacts' fields passed on unread: naming their types would import NumPy early
def verdict(cfg: AnalysisConfig, **facts: Any) -> CellVerdict:  # type: ignore[explicit-any]
    """A cell's verdict from the one table over its `CellFacts`: the one place asked."""
    # lazy: NumPy, with the deciding modules, once a sweep's first verdict is asked
    from harness.analysis.decision import CellFacts, decide

    return decide(CellFacts(cfg, **facts))


class ImagePool:
    """Prepares one image at a time, ahead of its cells; never beside a measured cell of
    its host (a build there makes the readings noisy)."""

    def __init__(self, runtime_for: Callable[[Cell], Runtime], progress: Progress):
        self.runtime_for = runtime_for
        self.progress = progress
        self._images: dict[str, Future[ImageInfo]] = {}
        self._queued: list[Cell] = []           # the cells whose images were queued
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prepare")
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._measuring: dict[str, int] = {}    # host label -> cells being measured
        self._preparing: dict[str, int] = {}    # host label -> images being prepared
        self._closed = False

    def _future(self, cell: Cell) -> Future[ImageInfo]:
        key = f"{cell.host.label}/{cell.image.label}"
        with self._lock:
            if key not in self._images:
                self._images[key] = self._pool.submit(self._prepare, cell)
                self._images[key].add_done_callback(
                    functools.partial(self._failed, label=cell.image.label))
            return self._images[key]

    def _failed(self, prepared: Future[ImageInfo], *, label: str) -> None:
        """Say at once that an image cannot be prepared, not at its first cell's turn."""
        if prepared.cancelled() or self._closed:
            return
        exc = prepared.exception()
        if exc is not None and not isinstance(exc, CancelledError):
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            self.progress(f"{label}: cannot be prepared ({first}); its cells end "
                          "unavailable when their turn comes")

    def _prepare(self, cell: Cell) -> ImageInfo:
        runtime = self.runtime_for(cell)
        if runtime.queues_cells:
            return runtime.prepare(cell.image, self.progress)
        host = cell.host.label
        with self._idle:
            self._idle.wait_for(lambda: self._closed or not self._measuring.get(host))
            if self._closed:
                raise CancelledError
            self._preparing[host] = self._preparing.get(host, 0) + 1
        try:
            return runtime.prepare(cell.image, self.progress)
        finally:
            with self._idle:
                self._preparing[host] -= 1
                self._idle.notify_all()

    @contextlib.contextmanager
    def measuring(self, cell: Cell) -> Iterator[None]:
        """While the cell runs, no image of its host is pulled or built."""
        if self.runtime_for(cell).queues_cells:
            yield
            return
        host = cell.host.label
        with self._idle:
            self._idle.wait_for(lambda: not self._preparing.get(host))
            self._measuring[host] = self._measuring.get(host, 0) + 1
        try:
            yield
        finally:
            with self._idle:
                self._measuring[host] -= 1
                self._idle.notify_all()

    def ready(self, cell: Cell) -> bool:
        """Whether the cell's image is prepared (or failed to be) already."""
        return self._future(cell).done()

    def built(self, cell: Cell) -> bool:
        """Whether the cell's image is prepared, not failed or cancelled (Ctrl-C)."""
        f = self._future(cell)
        return f.done() and not f.cancelled() and f.exception() is None

    def get(self, cell: Cell) -> ImageInfo:
        """The cell's image, prepared (raises what preparing it raised)."""
        return self._future(cell).result()

    def prefetch(self, cells: Iterable[Cell]) -> None:
        """Queue every image the cells need, in run order."""
        for cell in cells:
            self._queued.append(cell)
            self._future(cell)

    def keep_only(self, runs: Callable[[Cell], bool]) -> None:
        """Cancel the queued images that no cell that still `runs` uses."""
        keys = [(f"{c.host.label}/{c.image.label}", runs(c)) for c in self._queued]
        keep = {key for key, still in keys if still}
        with self._lock:
            for key in {key for key, _ in keys} - keep:
                self._images[key].cancel()

    def close(self) -> None:
        """Drop what has not started; a running build is the runtime's to abort."""
        with self._idle:
            self._closed = True
            self._idle.notify_all()
        self._pool.shutdown(wait=False, cancel_futures=True)


class GpuFacts:
    """The GPUs each host's engine shows, probed once per engine (not once per lane)."""

    def __init__(self, runtime_for: Callable[[Cell], Runtime]):
        self.runtime_for = runtime_for
        self.seen: dict[str, gpu.HostGpus] = {}   # host label -> what its engine showed
        self._local: gpu.HostGpus | None = None
        self._lock = threading.Lock()

    def host_gpus(self, cell: Cell, info: ImageInfo) -> gpu.HostGpus | None:
        """The cell's host's GPUs, through its engine or this machine's NVML; or None."""
        with self._lock:
            found = self.runtime_for(cell).gpu_inventory(info.ref, info.python or "python3")
            if found is not None:
                self.seen[cell.host.label] = found
                return found
            if not cell.host.is_local:
                return None
            if self._local is None:
                self._local = gpu.probe()
            return self._local

    def precheck(self, cell: Cell, info: ImageInfo) -> tuple[str, str] | None:
        """not-applicable / unsupported / degraded from the image's CUDA and the GPU."""
        if not cell.gpu.wants_gpu:
            return None
        host = self.host_gpus(cell, info)
        if host is not None and host.gpus and gpu.select(cell.gpu.value, host.gpus) is None:
            have = ", ".join(f"{g.index} ({g.name})" for g in host.gpus)
            return ("not-applicable", f"GPU {cell.gpu.value} is not on host {cell.host.label} "
                    f"(its GPUs: {have})")
        cuda = gpu.image_cuda(info.labels, info.env)
        if cuda is None or host is None:
            return None
        worst: tuple[str, str] | None = None
        for g in gpu.select(cell.gpu.value, host.gpus) or []:
            found = gpu.precheck(cuda, g, host.cuda_driver)
            if found is not None and (worst is None or found[0] == "not-applicable"):
                worst = found
        return worst


@dataclass(frozen=True)
class Ran:
    """One run of the agent: how it ended, its samples, the live decision (early stop)."""

    ended: RunOutcome
    series: Series
    watched: Watched | None
    run_s: float
    runtime: str            # the runtime's name (`Runtime.name`)

    def where(self) -> JSON:
        """The agent's where record (`--attribute`), as JSON; None without one."""
        return as_json(self.series.where) if self.series.where is not None else None


def emptied(outdir: Path) -> Path:
    """`outdir`, made and emptied of an earlier run's files."""
    outdir.mkdir(parents=True, exist_ok=True)
    for old in outdir.iterdir():
        if old.is_file():
            old.unlink()
    return outdir


@dataclass(frozen=True)
class Runner:
    """Runs a cell's agent once (`run`), with the services a run needs."""

    cfg: AnalysisConfig
    images: ImagePool
    runtime_for: Callable[[Cell], Runtime]
    progress: Progress
    cancel: threading.Event
    durable: bool = True    # False: the run's directory is thrown away after (no fsync)

    def run(self, cell: Cell, info: ImageInfo, outdir: Path,
            attribute: tuple[str, ...] = ()) -> Ran:
        """Run the agent once into `outdir` (emptied first) and read what it wrote."""
        emptied(outdir)
        request = RunRequest(cell, info, outdir, outdir / "stop", self.cancel,
                             attribute=attribute, durable=self.durable)
        runtime = self.runtime_for(cell)
        t_run = time.monotonic()
        # An attributed run runs its whole length: a live stop would cut its late window.
        live = (_Live.start(self.cfg, cell, outdir, Overrun(cell, self.progress))
                if not attribute else None)
        try:
            with self.images.measuring(cell):   # no pull or venv build on its host
                ended = runtime.run(request, self.progress)
        finally:
            watched = live.finish() if live is not None else None
        run_s = time.monotonic() - t_run
        series = (watched.series if watched is not None
                  else read_samples(outdir / "samples.jsonl"))
        return Ran(ended, series, watched, run_s, runtime.name)


class _Live:
    """Early-stop mode: tail samples.jsonl on a thread, stop the agent once certain."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.watched: Watched | None = None

    @classmethod
    def start(cls, cfg: AnalysisConfig, cell: Cell, outdir: Path,
              heard: Callable[[str, Mapping[str, object]], None] | None = None
              ) -> _Live | None:
        s = cell.settings
        if s.max_iterations is None:
            return None
        # lazy: NumPy, with the live decider, once a cell's run starts
        from harness.analysis import sequential

        decider = sequential.LiveDecider(cfg, s.min_iterations, s.max_iterations)
        live = cls()

        def watch() -> None:
            live.watched = sequential.watch_file(outdir / "samples.jsonl", decider,
                                               outdir / "stop", live.stop, heard=heard)

        live.thread = threading.Thread(target=watch, daemon=True, name="live")
        live.thread.start()
        return live

    def finish(self) -> Watched | None:
        """The watcher's decision and series, once it has read the file to its end."""
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
        return self.watched


class Overrun:
    """Says once that a budgeted run spent its budget before its least calls, so it
    runs on longer, and for about how long."""

    def __init__(self, cell: Cell, progress: Progress):
        s = cell.settings
        self.cell, self.progress, self.budget = cell.id, progress, s.run_budget
        self.least = min(s.budget_calls or BUDGET_MIN_CALLS, s.agent_iterations)
        self.warm = 0           # the calls of the warm-up (its last sample's `i`)
        self.said = self.budget is None

    def __call__(self, kind: str, fields: Mapping[str, object]) -> None:
        if self.said or kind != "sample":
            return
        i, phase, spent = (fields.get(k) for k in ("i", "phase", "cell_s"))
        if not isinstance(i, int):
            return
        if phase == "warmup":
            self.warm = i
            return
        done = i - self.warm
        if phase != "measure" or not isinstance(spent, int | float) or done <= 0 or \
                done >= self.least or self.budget is None or spent < self.budget:
            return
        self.said = True
        each = spent / done
        self.progress(f"{self.cell}: its {self.budget:g} s budget is spent after {done:,} "
                      f"calls ({human_seconds(each)} a call); it runs on to "
                      f"{self.least:,} calls, the fewest a trend is read from (about "
                      f"{human_seconds((self.least - done) * each)} more), unless a live "
                      "look decides it before")
