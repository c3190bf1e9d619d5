"""Run the agent once and read what it wrote: the run service (`Runner`), which the
stages' `context.Context` holds and every run of a cell goes through (an attempt in
`measure`, a confirmation round in `confirm`, an attributed run in `explain.plan`): the
one place a cell reaches its runtime and its host's turn with the image pool, the live
watcher in early-stop mode, the samples read once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness import analysis
from harness.analysis.records import human_seconds
from harness.matrixfile.model import BUDGET_MIN_CALLS, Cell
from harness.protocol.ingest import read_samples
from harness.protocol.series import Series
from harness.result.codec import JSON, as_json
from harness.runtimes.base import ImageInfo, Progress, RunOutcome, RunRequest, Runtime
from harness.stages.images import ImagePool
from harness.thresholds import AnalysisConfig

if TYPE_CHECKING:
    from harness.analysis.sequential import Watched


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
    """`outdir`, made and emptied of an earlier run's files (a confirmation round, an
    attributed run: each writes into its own directory again)."""
    outdir.mkdir(parents=True, exist_ok=True)
    for old in outdir.iterdir():
        if old.is_file():
            old.unlink()
    return outdir


@dataclass(frozen=True)
class Runner:
    """Runs a cell's agent once (`run`), with the services a run needs: the thresholds
    (the live decider's), the image pool (its host's turn), the runtime of each cell,
    progress and the cancel flag. `orchestrator.Sweep` builds one for its `Context`."""

    cfg: AnalysisConfig
    images: ImagePool
    runtime_for: Callable[[Cell], Runtime]
    progress: Progress
    cancel: threading.Event
    durable: bool = True    # False: the run's directory is thrown away after (no fsync)

    def run(self, cell: Cell, info: ImageInfo, outdir: Path,
            attribute: tuple[str, ...] = ()) -> Ran:
        """Run the agent once into `outdir` (made, and emptied of an earlier run's
        files) and read what it wrote (parsed while it runs in early-stop mode, else
        after; an attributed run is never stopped early)."""
        emptied(outdir)
        request = RunRequest(cell, info, outdir, outdir / "stop", self.cancel,
                             attribute=attribute, durable=self.durable)
        runtime = self.runtime_for(cell)
        t_run = time.monotonic()
        # An attributed run (explain) runs its whole length: a live decision would end
        # it before its late window.
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
        decider = analysis.LiveDecider(cfg, s.min_iterations, s.max_iterations)
        live = cls()

        def watch() -> None:
            live.watched = analysis.watch_file(outdir / "samples.jsonl", decider,
                                               outdir / "stop", live.stop, heard=heard)

        live.thread = threading.Thread(target=watch, daemon=True, name="live")
        live.thread.start()
        return live

    def finish(self) -> Watched | None:
        """The watcher's decision and the series it read, once it has read the file to
        its end (the agent has exited: the file grows no more, so that end comes; a
        watcher cut off after a while lost the live decision the run stopped on)."""
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
        return self.watched


class Overrun:
    """Says once, while a budgeted run goes on, that its budget is spent before its
    least calls (`RunRequest.agent_args`' --budget-min: BUDGET_MIN_CALLS, or a run
    again's `budget_calls`), which the agent makes before the budget ends a run: a slow
    step's run then lasts longer than its budget, by how much it says (issue 79 item
    10: a 5 s cell ran 55.6 s, 244 ms a call, with nothing said). Fed the samples as the
    live watcher reads them; the agent's `cell_s` is the measured phase's own seconds."""

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
