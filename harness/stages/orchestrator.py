"""plan -> run cells -> ingest -> analyse -> store: the sweep, wired from its stages.

`Sweep` builds the services and its lanes run each cell down `measure`, `settle`, then
the store; a result is written once, when final, so `--resume` skips it. Lanes: one cell
at a time per GPU of each host, in parallel up to `max-parallel`.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.analysis.kinds import BAD, GOOD
from harness.matrixfile.model import Cell, Matrix, abilities, row_baselines
from harness.preflight import whole_script
from harness.result.model import CellResult
from harness.runtimes import Engines
from harness.runtimes.base import CellEvents, Progress, Runtime
from harness.stages.context import Context, GpuFacts, ImagePool, Measured, Runner
from harness.stages.measure import measure
from harness.stages.settle import Job, Rows, settle
from harness.store.gate import why_not_current
from harness.store.results import RunStore, SeriesCache
from harness.thresholds import AnalysisConfig

__all__ = ["Measured", "Sweep", "SweepOutcome", "lanes", "prefetch_analysis", "sweep"]

Lane = Callable[[list[Cell]], None]


@dataclass
class SweepOutcome:
    store: RunStore
    results: dict[str, CellResult]
    series: SeriesCache = field(default_factory=lambda: SeriesCache(None))  # parsed once
    ran: int = 0
    reused: int = 0
    seconds: float = 0.0

    @property
    def bad(self) -> list[str]:
        return [k for k, r in self.results.items() if r.verdict in BAD]


class Sweep:
    """Runs cells of one matrix into one store, handing its stages `ctx`, never itself."""

    def __init__(self, matrix: Matrix, runtime: Runtime, store: RunStore, progress: Progress,
                 runtimes: dict[str, Runtime] | None = None):
        self.matrix, self.runtime, self.store, self.progress = matrix, runtime, store, progress
        self.runtimes = runtimes or {}   # host label -> runtime; one host: `runtime`
        self.engines = Engines(runtime, self.runtimes)
        self.runtime_for = self.engines.runtime_for
        self.cfg: AnalysisConfig = matrix.analysis
        self.images = ImagePool(self.runtime_for, progress)
        self.series = SeriesCache(store.root)
        cancel = threading.Event()
        self.ctx = Context(matrix, self.cfg, store, progress, self.images,
                           GpuFacts(self.runtime_for), self.runtime_for, self.series,
                           Runner(self.cfg, self.images, self.runtime_for, progress, cancel,
                                  store.durable),
                           cancel)
        self._lock = threading.Lock()
        self._todo: list[Cell] = []
        self.faulted: set[Path] = set()     # scenario files the agent could not call
        self.whole: frozenset[Path] = frozenset()   # plain scripts, run once (no step())

    @property
    def cancel(self) -> threading.Event:
        """Set on Ctrl-C: every stage stops after its current run."""
        return self.ctx.cancel

    def run_cell(self, cell: Cell) -> Measured:
        """The cell's within-run result (the plan bisect and fit run too)."""
        return measure(self.ctx, cell)

    def compare(self, cell: Cell, measured: Measured, base: Cell, base_result: CellResult
                ) -> CellResult:
        """`cell` against `base` as a sweep's row compares it (`settle.settle`)."""
        return settle(self.ctx, Job(cell, measured, base, base_result))

    def run(self, cells: list[Cell], resume: bool) -> SweepOutcome:
        start = time.monotonic()
        outcome = SweepOutcome(self.store, {})
        todo = [c for c in cells if not (resume and self._reuse(c, outcome))]
        if resume:
            todo = self._with_baselines(cells, todo, outcome)
        if outcome.reused:
            cells_word = "cell" if outcome.reused == 1 else "cells"
            self.progress(f"resume: {outcome.reused} finished {cells_word} reused from "
                          f"{self.store.root}, {len(todo)} to run")
        rows = Rows(cells, self.matrix.baseline, outcome.results)
        stop, counter = threading.Event(), [0]
        self._todo = todo
        # Each scenario file read once, for the progress lines.
        self.whole = frozenset(p for p in {c.scenario.script for c in todo} if whole_script(p))

        def lane(cells_in_lane: list[Cell]) -> None:
            for cell in cells_in_lane:
                if stop.is_set():
                    return
                if self._runs(cell):
                    self._one(cell, rows, outcome, counter, len(todo), stop)

        waves = plan(todo, self.runtime.queues_cells)
        # Every image queued in run order (`gpu: all` cells run last).
        self.images.prefetch(sorted(todo, key=lambda c: c.gpu.value == "all"))
        try:
            for groups in waves:
                run_lanes(groups, lane, self.matrix.max_parallel, stop, self.cancel)
            for res in rows.flush():
                self._store(res, outcome)
        except BaseException:
            # Ctrl-C: a venv build in the prepare thread is killed too.
            for rt in (self.runtime, *self.runtimes.values()):
                rt.abort_prepare()
            raise
        finally:
            self.images.close()
        outcome.seconds = time.monotonic() - start
        outcome.series = self.series
        return outcome

    def _reuse(self, cell: Cell, outcome: SweepOutcome) -> bool:
        """Reuse the cell's stored result where its run key matches; else say why not."""
        old = self.store.load_cell(cell.id)
        if old is None:
            return False
        why = why_not_current(old, cell, self.runtime_for(cell).name)
        if why is not None:
            self.progress(f"resume: {cell.id}: {why}; running it again")
            return False
        if old.image.index != cell.image.index:
            # Images added or removed before it since it ran: it takes its new place
            old = replace(old, image=replace(old.image, index=cell.image.index))
            self.store.write_cell(old)
        outcome.results[cell.id] = old
        outcome.reused += 1
        return True

    def _with_baselines(self, cells: list[Cell], todo: list[Cell], outcome: SweepOutcome
                        ) -> list[Cell]:
        """`todo` and the reused cells whose row baseline runs again."""
        again = {c.id for c in todo}
        bases = row_baselines(cells, self.matrix.baseline)
        for c in cells:
            base = bases[c.id]
            if c.id not in again and base != c.id and base in again:
                outcome.results.pop(c.id, None)
                outcome.reused -= 1
                again.add(c.id)
                self.progress(f"resume: {c.id}: its row baseline {base} runs again; "
                              "running it again")
        return [c for c in cells if c.id in again]

    def _one(self, cell: Cell, rows: Rows, outcome: SweepOutcome, counter: list[int],
             total: int, stop: threading.Event) -> None:
        """One cell of a lane: measured, then each comparison it makes ready settled."""
        with self._lock:
            counter[0] += 1
            n = counter[0]
        s = cell.settings
        how = ("a whole script (no setup/step), run once" if cell.scenario.script in self.whole
               else (f"for {s.run_budget:g} s, at most {s.max_iterations:,} calls, early "
                     "stop") if s.max_iterations and s.run_budget is not None
               else f"up to {s.max_iterations} calls, early stop" if s.max_iterations
               else f"{s.iterations} call{'s' if s.iterations != 1 else ''}")
        image = _image_of(cell, self.matrix.runtime)
        first = "" if image is None or self.images.ready(cell) else f"preparing {image}, then "
        self.progress(f"[{n}/{total}] {cell.id}: {first}running ({how})")
        self._event(cell, "running")
        try:
            measured = measure(self.ctx, cell)
        finally:
            # "ended": its image never got built (it failed, or Ctrl-C came first)
            self._event(cell, "done" if self.images.built(cell) else "ended")
        result = measured.result
        self.series.keep(cell.id, measured.series)
        with self._lock:
            outcome.ran += 1
        stand, jobs = rows.ready(cell, measured)
        pending = ("; vs baseline: pending"
                   if rows.bases.get(cell.id, cell.id) != cell.id and result.verdict in GOOD
                   else "")
        self.progress(f"[{n}/{total}] {cell.id}: {result.verdict} within run "
                      f"({result.reason}) in {result.timings.cell_s:.1f}s{pending}")
        for res in stand:
            self._store(res, outcome)
        for job in jobs:
            self._store(settle(self.ctx, job), outcome)
        if self.matrix.fail_fast and result.verdict in BAD:
            stop.set()
        if result.end.error is not None and result.end.error.fault == "scenario":
            self._scenario_fault(cell, result.end.error.message)

    def _store(self, result: CellResult, outcome: SweepOutcome) -> None:
        """A settled cell, written once and kept in the outcome."""
        self.store.write_cell(result)
        with self._lock:
            outcome.results[result.id] = result

    def _scenario_fault(self, cell: Cell, message: str) -> None:
        """The agent could not call the cell's scenario: the file's other cells would
        fail alike on any image, so none of them runs."""
        script = cell.scenario.script
        with self._lock:
            if script in self.faulted:
                return
            self.faulted.add(script)
            left = sum(c.scenario.script == script and c != cell for c in self._todo)
        self.images.keep_only(self._runs)
        self.progress(f"{cell.id}: {message}: the scenario's fault, not the image's; "
                      + (f"its {left} other cell{'s are' if left != 1 else ' is'} "
                         "not run; " if left else "")
                      + "fix the scenario and run the sweep again")

    def _runs(self, cell: Cell) -> bool:
        """Whether a cell of this sweep still runs: its scenario file has not faulted."""
        return cell.scenario.script not in self.faulted

    def _event(self, cell: Cell, event: str) -> None:
        """Tell a live display (harness/report/live.py) that a cell started or ended."""
        if isinstance(self.progress, CellEvents):
            self.progress.cell(cell, event, None)


def prefetch_analysis(*more: str, then: Callable[[], object] | None = None
                      ) -> threading.Thread:
    """Import NumPy's deciding modules and `more` while the first container starts."""

    def load() -> None:
        # Only a head start: failures are the main thread's to report.
        with contextlib.suppress(BaseException):
            for name in ("harness.analysis.decision", "harness.analysis.sequential",
                         "harness.analysis.baseline", *more):
                importlib.import_module(name)
            if then is not None:
                then()

    t = threading.Thread(target=load, daemon=True, name="prefetch")
    t.start()
    return t


def sweep(matrix: Matrix, cells: list[Cell], runtime: Runtime, store: RunStore,
          progress: Callable[[str], None], resume: bool,
          runtimes: dict[str, Runtime] | None = None) -> SweepOutcome:
    """Check the runtime(s), clean up leftovers, run the cells, compare rows."""
    Engines(runtime, runtimes).start(cells)
    return Sweep(matrix, runtime, store, progress, runtimes).run(cells, resume)


def _image_of(cell: Cell, runtime: str) -> str | None:
    """What a cell may wait for before it runs, in words (an image, a venv); None."""
    if abilities(runtime).container_images:
        return "its image (pulled where missing)"
    return "its environment (a venv)" if cell.image.pip else None


def lanes(cells: Sequence[Cell]) -> list[list[Cell]]:
    """Group cells so each GPU of each host (or its CPU) runs one cell at a time."""
    out: dict[tuple[str, str], list[Cell]] = {}
    for c in cells:
        out.setdefault(c.lane, []).append(c)
    return list(out.values())


def plan(cells: Sequence[Cell], queues_cells: bool) -> tuple[list[list[Cell]], ...]:
    """The waves of lanes to run, in order."""
    if queues_cells:
        return ([[c] for c in cells],)
    spread = [c for c in cells if c.gpu.value != "all"]
    whole = [c for c in cells if c.gpu.value == "all"]
    return (lanes(spread), lanes(whole))


def run_lanes(groups: list[list[Cell]], lane: Lane, width: int | None,
              stop: threading.Event, cancel: threading.Event) -> None:
    """Run each group through `lane`, up to `width` at once (None: all). Ctrl-C or a
    lane's exception sets `cancel` (kill running cells) and `stop` (start no more); a
    wave that simply ends leaves both unset for the next wave."""
    width = min(len(groups), width or len(groups)) or 1
    pool = (ThreadPoolExecutor(max_workers=width, thread_name_prefix="lane")
            if width > 1 else None)
    try:
        if pool is None:
            for group in groups:
                lane(group)
            return
        futures = [pool.submit(lane, g) for g in groups]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        for f in done:
            f.result()
    except BaseException:
        cancel.set()
        stop.set()
        raise
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
