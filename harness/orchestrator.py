"""plan -> run cells -> ingest -> analyse -> store: the sweep as one visible pipeline.

Cells run one per GPU lane (CPU-only cells form their own lane); lanes run in
parallel up to `max-parallel`. A cell's result is written once, when its verdict is
final: a row's baseline right after it ran, any other cell right after it is compared
with its baseline in memory (`RowComparisons`). Ctrl-C or a crash loses at most the
running cells and those waiting for their baseline; `--resume` skips the rest.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness import gpu
from harness.analysis.config import AnalysisConfig
from harness.analysis.kinds import BAD, GOOD, UNAVAILABLE
from harness.errors import EngineUnavailable, EnvironmentUnavailable
from harness.preflight import decidable_iterations
from harness.protocol.ingest import Series, no_samples, read_samples
from harness.result.build import cell_result, timings_of, with_verdict
from harness.result.model import Attempt, CellResult, Timings, Unavailable
from harness.runtimes.base import (
    CellEvents,
    ImageInfo,
    Progress,
    RunOutcome,
    RunRequest,
    Runtime,
)
from harness.spec.model import Cell, Matrix, row_baselines
from harness.store.results import RunStore, SeriesCache

if TYPE_CHECKING:
    from harness.analysis.records import VsBaseline
    from harness.analysis.sequential import Watched
    from harness.analysis.verdict import CellVerdict


@dataclass
class SweepOutcome:
    store: RunStore
    results: dict[str, CellResult]
    series: SeriesCache = field(default_factory=lambda: SeriesCache(None))  # parsed once
    ran: int = 0
    reused: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    @property
    def bad(self) -> list[str]:
        return [k for k, r in self.results.items() if r.verdict in BAD]

    @property
    def unavailable(self) -> list[str]:
        return [k for k, r in self.results.items() if r.verdict == UNAVAILABLE]


@dataclass(frozen=True)
class Measured:
    """A cell that ran (or could not): its within-run result, held in memory until its
    row's comparison is known, with the verdict and series the comparison needs."""

    result: CellResult
    verdict: CellVerdict
    series: Series


def lanes(cells: list[Cell]) -> list[list[Cell]]:
    """Group cells so each GPU of each host runs one cell at a time; CPU-only cells of a
    host share one lane."""
    out: dict[tuple[str, str], list[Cell]] = {}
    for c in cells:
        out.setdefault(c.lane, []).append(c)
    return list(out.values())


class Sweep:
    """Runs cells of one matrix against one runtime into one store."""

    def __init__(self, matrix: Matrix, runtime: Runtime, store: RunStore, progress: Progress,
                 runtimes: dict[str, Runtime] | None = None):
        self.matrix = matrix
        self.runtime = runtime
        # One runtime per host label; a single-host sweep uses `runtime` for all cells.
        self.runtimes = runtimes or {}
        self.store = store
        self.progress = progress
        self.cfg: AnalysisConfig = matrix.analysis
        self._images: dict[str, Future[ImageInfo]] = {}
        # One worker: pulls/builds one image at a time, ahead of the cells that need
        # them, so the next image is pulled while the current cell runs.
        self._prepare_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prepare")
        self._image_lock = threading.Lock()
        self._lock = threading.Lock()
        self._host_gpus: gpu.HostGpus | None = None
        self._gpu_lock = threading.Lock()
        self._gpu_seen: dict[str, gpu.HostGpus] = {}
        self.cancel = threading.Event()
        self._busy_said = threading.Event()   # the host-busy note, once a sweep
        self.series = SeriesCache(store.root)    # each cell's series, parsed once

    def runtime_for(self, cell: Cell) -> Runtime:
        return self.runtimes.get(cell.host.label, self.runtime)

    def _prepare(self, cell: Cell) -> Future[ImageInfo]:
        key = f"{cell.host.label}/{cell.image.label}"
        with self._image_lock:
            if key not in self._images:
                self._images[key] = self._prepare_pool.submit(
                    self.runtime_for(cell).prepare, cell.image, self.progress)
            return self._images[key]

    def image(self, cell: Cell) -> ImageInfo:
        """The cell's image, prepared (pulled, venv built) once per host."""
        return self._prepare(cell).result()

    def prefetch(self, cells: list[Cell]) -> None:
        """Queue every image the cells need, in run order."""
        for cell in cells:
            self._prepare(cell)

    def run(self, cells: list[Cell], resume: bool) -> SweepOutcome:
        start = time.monotonic()
        outcome = SweepOutcome(self.store, {})
        todo: list[Cell] = []
        for cell in cells:
            old = self.store.load_cell(cell.id) if resume else None
            if old is not None:
                outcome.results[cell.id] = old
                outcome.reused += 1
            else:
                todo.append(cell)
        if outcome.reused:
            self.progress(f"resume: {outcome.reused} finished cells reused, {len(todo)} to run")
        total = len(todo)
        rows = RowComparisons(self, cells, outcome.results)
        counter = [0]
        stop = threading.Event()

        def lane(cells_in_lane: list[Cell]) -> None:
            for cell in cells_in_lane:
                if stop.is_set():
                    return
                with self._lock:
                    counter[0] += 1
                    n = counter[0]
                s = cell.settings
                how = (f"up to {s.max_iterations} calls, early stop" if s.max_iterations
                       else f"{s.iterations} call{'s' if s.iterations != 1 else ''}")
                self.progress(f"[{n}/{total}] {cell.id}: running ({how})")
                self._event(cell, "running", None)
                try:
                    measured = self.run_cell(cell)
                finally:
                    self._event(cell, "done", None)
                result = measured.result
                with self._lock:
                    outcome.ran += 1
                # Only what is known now: the row comparison prints its own line.
                pending = ("; vs baseline: pending" if rows.compared(cell)
                           and result.verdict in GOOD else "")
                self.progress(f"[{n}/{total}] {cell.id}: {result.verdict} within run "
                              f"({result.reason}){pending} in "
                              f"{result.timings.cell_s:.1f}s")
                rows.settle(cell, measured)
                if self.matrix.fail_fast and result.verdict in BAD:
                    stop.set()

        # A `gpu: all` cell holds every GPU of its host: it runs after the other lanes.
        spread = [c for c in todo if c.gpu.value != "all"]
        whole = [c for c in todo if c.gpu.value == "all"]
        self.prefetch(spread + whole)
        plan: tuple[list[list[Cell]], ...] = (lanes(spread), lanes(whole))
        if self.runtime.queues_cells:
            # A cluster scheduler (Slurm) decides what runs when: submit every cell now.
            plan = ([[c] for c in todo],)
        try:
            for groups in plan:
                self._run_lanes(groups, lane, stop)
            rows.flush()
        except BaseException:
            # Ctrl-C: a venv build in the prepare thread is killed too (no temp folder).
            for rt in (self.runtime, *self.runtimes.values()):
                rt.abort_prepare()
            raise
        finally:
            self._prepare_pool.shutdown(wait=False, cancel_futures=True)
        outcome.seconds = time.monotonic() - start
        outcome.series = self.series
        return outcome

    def _event(self, cell: Cell, event: str, result: CellResult | None) -> None:
        """Tell a live display (harness/report/live.py) that a cell started or ended."""
        if isinstance(self.progress, CellEvents):
            self.progress.cell(cell, event, result)

    def _run_lanes(self, groups: list[list[Cell]], lane: Callable[[list[Cell]], None],
                   stop: threading.Event) -> None:
        width = min(len(groups), self.matrix.max_parallel or len(groups)) or 1
        if width <= 1:
            for group in groups:
                lane(group)
            return
        pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="lane")
        try:
            futures = [pool.submit(lane, g) for g in groups]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for f in done:
                f.result()
        except BaseException:
            # Ctrl-C lands in this thread: tell the running cells to kill their
            # containers/processes now instead of waiting for them to finish.
            self.cancel.set()
            raise
        finally:
            stop.set()
            pool.shutdown(wait=True)

    def gpu_precheck(self, cell: Cell, info: ImageInfo) -> tuple[str, str] | None:
        """not-applicable / degraded decided from the image's CUDA and the GPU, or None."""
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
        chosen = gpu.select(cell.gpu.value, host.gpus) or []
        worst: tuple[str, str] | None = None
        for g in chosen:
            found = gpu.precheck(cuda, g, host.cuda_driver)
            if found is not None and (worst is None or found[0] == "not-applicable"):
                worst = found
        return worst

    def host_gpus(self, cell: Cell, info: ImageInfo) -> gpu.HostGpus | None:
        """The cell's host's GPUs: through its engine (a probe container) where the runtime
        can, else this machine's NVML for a local host; None for another host."""
        with self._gpu_lock:  # one probe per engine, not one per lane
            found = self.runtime_for(cell).gpu_inventory(info.ref, info.python or "python3")
        if found is not None:
            self._gpu_seen[cell.host.label] = found
            return found
        if not cell.host.is_local:
            return None
        with self._image_lock:
            if self._host_gpus is None:
                self._host_gpus = gpu.probe()
        return self._host_gpus

    def run_cell(self, cell: Cell) -> Measured:
        """Run the cell (again, longer, while its growth is ambiguous) and decide its
        within-run verdict. Nothing is written here but the agent's samples: the result
        is written once its row's comparison is known (`RowComparisons.settle`)."""
        t_wait = time.monotonic()
        outdir = self.store.cell_dir(cell.id, fresh=True)
        try:
            self.image(cell)
        except EnvironmentUnavailable as exc:
            # An image that cannot be pulled / a pip pin that does not install: this
            # cell is `unavailable`, the others still run and the reports are written.
            return self._unavailable(cell, exc, time.monotonic() - t_wait)
        wait_s = time.monotonic() - t_wait
        # SciPy takes ~1.4 s to import: the CLI starts that import in a background
        # thread (see prefetch_analysis) while the first container starts.
        from harness.analysis.decision import CellFacts, decide

        t0 = time.monotonic()
        info = self.image(cell)
        runtime = self.runtime_for(cell)
        attempts: list[Attempt] = []
        run_cell = cell
        retried = False
        pre = self.gpu_precheck(cell, info)
        if pre is not None and pre[0] == "not-applicable":
            verdict = decide(CellFacts(self.cfg, precheck=pre))
            return self._measured(cell, info, runtime, RunOutcome(exit_code=None), Series(),
                                  verdict, [], Timings(cell_s=time.monotonic() - t0,
                                                       prepare_s=info.prepare_s))
        if pre is not None and pre[0] == "unsupported":
            # Run it, briefly: what happens decides (see _gpu_afterwards).
            short = dataclasses.replace(run_cell.settings, timeout=min(
                run_cell.settings.timeout, UNSUPPORTED_DEADLINE_S))
            run_cell = dataclasses.replace(run_cell, scenario=dataclasses.replace(
                run_cell.scenario, settings=short))
            pre = (pre[0], f"{pre[1]} (deadline {short.timeout:.0f}s)")
            self.progress(f"{cell.id}: {pre[1]}")
        while True:
            if attempts:    # a run again starts from an empty directory
                outdir = self.store.cell_dir(cell.id, fresh=True)
            request = RunRequest(run_cell, info, outdir, outdir / "stop", self.cancel)
            t_run = time.monotonic()
            live = self._start_live(run_cell, outdir)
            try:
                ended = runtime.run(request, self.progress)
            finally:
                watched = self._stop_live(live)
            run_s = time.monotonic() - t_run
            if ended.error and not retried:
                # The engine went away (restart, lost connection): once more, then record.
                retried = True
                attempts.append(Attempt("crash", ended.error, run_cell.settings.iterations))
                self.progress(f"{cell.id}: {ended.error}; retrying once")
                continue
            t_an = time.monotonic()
            # Early-stop mode parsed the samples as they came (one reader, once).
            series = (watched.series if watched is not None
                      else read_samples(outdir / "samples.jsonl"))
            decision = watched.decision if watched is not None else None
            verdict = decide(CellFacts(self.cfg, series, ended, cell.gpu.wants_gpu, decision,
                                       pre))
            analyse_s = time.monotonic() - t_an
            s = run_cell.settings
            attempts.append(Attempt(verdict.verdict, verdict.reason, s.agent_iterations))
            if verdict.verdict != "ambiguous" or len(attempts) > cell.settings.repeats:
                break
            # Undecided growth needs a longer look, not the same look again: twice as
            # long, and at least long enough to decide from step samples alone. In
            # early-stop mode the agent runs up to max_iterations: that is what grows.
            calls = max(s.agent_iterations * 2, decidable_iterations(s, self.cfg))
            longer = (dataclasses.replace(s, iterations=calls) if s.max_iterations is None
                      else dataclasses.replace(s, max_iterations=calls))
            expected_s = run_s * calls / max(1, s.agent_iterations)
            if expected_s > s.timeout:
                self.progress(f"{cell.id}: ambiguous ({verdict.reason}); not run again: "
                              f"{calls} iterations would take about {expected_s:.0f} s, "
                              f"past the cell's timeout ({s.timeout:.0f} s); raise "
                              "timeout: to let it decide")
                break
            run_cell = dataclasses.replace(run_cell, scenario=dataclasses.replace(
                run_cell.scenario, settings=longer))
            self.progress(f"{cell.id}: ambiguous ({verdict.reason}); running again with "
                          f"{calls} iterations ({len(attempts)}/{cell.settings.repeats})")
        return self._measured(cell, info, runtime, ended, series, verdict, attempts,
                              timings_of(info, series, run_s, analyse_s, wait_s,
                                         time.monotonic() - t0))

    def _unavailable(self, cell: Cell, exc: EnvironmentUnavailable, waited: float
                     ) -> Measured:
        from harness.analysis.decision import CellFacts, decide

        text = str(exc).strip()
        reason = text.splitlines()[0] if text else type(exc).__name__
        what = "engine" if isinstance(exc, EngineUnavailable) else "image"
        verdict = decide(CellFacts(self.cfg, unavailable=reason))
        return self._measured(cell, ImageInfo(ref=cell.image.ref), self.runtime_for(cell),
                              RunOutcome(exit_code=None, error=text), Series(), verdict, [],
                              Timings(cell_s=waited, prepare_s=waited), Unavailable(what, text))

    def _start_live(self, cell: Cell, outdir: Path) -> _Live | None:
        """Early-stop mode: tail samples.jsonl on a thread, stop the agent once certain."""
        s = cell.settings
        if s.max_iterations is None:
            return None
        from harness.analysis.replay import live_decider
        from harness.analysis.sequential import watch_file

        decider = live_decider(self.cfg, s.min_iterations, s.max_iterations)
        live = _Live(threading.Event())

        def watch() -> None:
            live.watched = watch_file(outdir / "samples.jsonl", decider, outdir / "stop",
                                      live.stop)

        live.thread = threading.Thread(target=watch, daemon=True, name="live")
        live.thread.start()
        return live

    def _stop_live(self, live: _Live | None) -> Watched | None:
        """The watcher's decision and the series it read (None: no watcher, or it did
        not finish reading within 30 s, when the file is read again)."""
        if live is None:
            return None
        live.stop.set()
        if live.thread is not None:
            live.thread.join(timeout=30)
        return live.watched

    def _measured(self, cell: Cell, info: ImageInfo, runtime: Runtime, ended: RunOutcome,
                  series: Series, verdict: CellVerdict, attempts: list[Attempt],
                  timings: Timings, unavailable: Unavailable | None = None) -> Measured:
        """The cell's within-run result, from everything the run left."""
        result = cell_result(cell, verdict, series, ended, info=info, runtime=runtime.name,
                             script=self._rel(cell.scenario.script),
                             gpus=self._gpu_seen.get(cell.host.label), attempts=attempts,
                             timings=timings, unavailable=unavailable)
        return Measured(result, verdict, series)

    def _rel(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.matrix.file.resolve().parent))
        except ValueError:
            return str(path)

    def row_bases(self, cells: list[Cell]) -> dict[str, str]:
        """Cell id -> its row baseline's id: the matrix's baseline image, else the row's
        first image."""
        return row_baselines(cells, self.matrix.baseline)


    def compare(self, cell: Cell, measured: Measured, base: Cell, base_result: CellResult
                ) -> CellResult:
        """The cell against its row's baseline, in memory: the pooled comparison, and
        interleaved rounds where it leaves a doubt, gathered as facts; `decide` sets the
        final verdict. Nothing is written here."""
        from harness.analysis.decision import CellFacts, decide, needs_rounds, pooled_text
        from harness.analysis.rowcompare import baseline_facts
        from harness.replicate import confirm

        res = measured.result
        if (base_result.verdict not in GOOD | {"leak", "slowdown"}
                or res.verdict == UNAVAILABLE):
            return res
        # A resumed or cached baseline's samples are read once, here.
        base_series, series = self.series(base.id) or no_samples(), measured.series
        label = base.image.label
        facts = baseline_facts(self.cfg, base_series, series, label, cell.settings.rounds,
                               good=res.verdict in GOOD)
        steps, busy = facts.steps, facts.busy
        if res.verdict in GOOD and steps is not None and needs_rounds(facts, self.cfg):
            pooled = pooled_text(steps, label)
            what = f"suspected {steps.direction}" if steps.direction != "~" else "host busy"
            if steps.direction == "~" and not self._busy_said.is_set():
                # Said once a sweep: every later cell on this host is as busy.
                self._busy_said.set()
                self.progress(f"host busy: {busy:.0%} run-queue delay in {cell.id} or its "
                              "baseline; unchanged-looking cells are confirmed in "
                              "interleaved rounds")
            self.progress(f"{cell.id} vs {label}: {pooled}, {what}; confirming in "
                          f"interleaved rounds (2 to {2 * cell.settings.rounds}, until "
                          "settled)")
            facts = dataclasses.replace(facts, confirmation=confirm(
                self, base, cell, steps.direction, cell.settings.rounds,
                len(series.step_times())))
        v = decide(CellFacts(self.cfg, baseline=facts, within=measured.verdict))
        if res.verdict in GOOD:
            said = (f"{v.verdict} ({v.reason})" if v.verdict != res.verdict
                    else _vs_text(v.vs_baseline, self.cfg))
            self.progress(f"{cell.id} vs {label}: {said}")
        return with_verdict(res, v)


@dataclass
class _Live:
    """The live (early-stop) watcher of one run."""

    stop: threading.Event
    thread: threading.Thread | None = None
    watched: Watched | None = None


class RowComparisons:
    """Settles each cell of a sweep once: a row's baseline is written as soon as it ran;
    any other cell is compared with it in memory (waiting for it if it has not run
    yet), then written, once. Cells whose baseline never ran (fail-fast) are written
    as they are by `flush`."""

    def __init__(self, sweep: Sweep, cells: list[Cell], results: dict[str, CellResult]):
        self.sweep = sweep
        self.bases = sweep.row_bases(cells)
        self.cells = {c.id: c for c in cells}
        self.results = results      # final results, shared with the SweepOutcome
        self.waiting: dict[str, list[tuple[Cell, Measured]]] = {}
        self.lock = threading.Lock()

    def compared(self, cell: Cell) -> bool:
        return self.bases.get(cell.id, cell.id) != cell.id

    def settle(self, cell: Cell, measured: Measured) -> None:
        sweep = self.sweep
        sweep.series.keep(cell.id, measured.series)
        base_id = self.bases.get(cell.id, cell.id)
        if base_id == cell.id:
            self._final(cell.id, measured.result)
            with self.lock:
                held = self.waiting.pop(cell.id, [])
            for other, m in held:
                self._final(other.id, sweep.compare(other, m, cell, measured.result))
            return
        with self.lock:
            base_result = self.results.get(base_id)
            if base_result is None:
                self.waiting.setdefault(base_id, []).append((cell, measured))
                return
        self._final(cell.id, sweep.compare(cell, measured, self.cells[base_id],
                                           base_result))

    def flush(self) -> None:
        """Write the cells still waiting for a baseline that did not run."""
        with self.lock:
            held = [x for waiting in self.waiting.values() for x in waiting]
            self.waiting.clear()
        for cell, measured in held:
            self._final(cell.id, measured.result)

    def _final(self, cell_id: str, result: CellResult) -> None:
        self.sweep.store.write_cell(result)
        with self.lock:
            self.results[cell_id] = result


def _vs_text(vs: VsBaseline | None, cfg: AnalysisConfig) -> str:
    from harness.analysis.compare import unchanged_because

    if vs is not None and vs.confirmation is not None:
        return vs.confirmation.reason   # starts with what the rounds decided
    if vs is not None and vs.steps is not None:
        s = vs.steps
        return (f"no change: pooled steps {s.ratio:.2f}x (p={s.p_value:.2g}), "
                f"{unchanged_because(s, cfg)}")
    return "no step times"


UNSUPPORTED_DEADLINE_S = 300.0


def prefetch_analysis(*more: str) -> threading.Thread:
    """Import the statistics (NumPy) and `more` modules (the reporters) in the background,
    while the first container starts: the first verdict and the reports need them."""
    import importlib

    def load() -> None:
        for name in ("harness.analysis.verdict", *more):
            importlib.import_module(name)

    t = threading.Thread(target=load, daemon=True, name="prefetch")
    t.start()
    return t


def sweep(matrix: Matrix, cells: list[Cell], runtime: Runtime, store: RunStore,
          progress: Callable[[str], None], resume: bool,
          runtimes: dict[str, Runtime] | None = None) -> SweepOutcome:
    """Check the runtime(s), clean up leftovers, run the cells, compare rows."""
    from harness.runtimes import Engines

    Engines(runtime, runtimes).start(cells)
    return Sweep(matrix, runtime, store, progress, runtimes).run(cells, resume)
