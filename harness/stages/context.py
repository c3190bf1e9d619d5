"""What every stage is given (the `Context`: the services it uses, which
`orchestrator.Sweep` builds) and the values a cell carries from stage to stage
(`CellRun`, then `Measured`; a comparison's `RoundsPlan`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.matrixfile.model import Cell, Matrix
from harness.protocol.series import Series
from harness.result.model import Attempt, CellResult, Unavailable
from harness.runtimes.base import ImageInfo, Progress, RunOutcome, Runtime
from harness.stages.execute import Runner
from harness.stages.gpucheck import GpuFacts
from harness.stages.images import ImagePool
from harness.store.results import RunStore, SeriesCache
from harness.thresholds import AnalysisConfig

if TYPE_CHECKING:
    from harness.analysis.decision import CellVerdict
    from harness.analysis.records import Baseline


@dataclass(frozen=True)
class Context:
    """The narrow services the stages use, and nothing else of the sweep that made them
    (`orchestrator.Sweep` builds one and hands it down; a stage never calls back up)."""

    matrix: Matrix              # its file (scripts named relative to it) and name
    cfg: AnalysisConfig         # thresholds for every decision
    store: RunStore             # where cells and rounds write
    progress: Progress          # one line per event
    images: ImagePool           # each cell's image, prepared once per host (`get`), and
                                # none on its host while it runs (`measuring`)
    gpus: GpuFacts              # the hosts' GPUs, probed once
    runtime_for: Callable[[Cell], Runtime]   # the runtime (host) that runs a cell
    series: SeriesCache         # each cell's samples, parsed once
    runner: Runner              # runs a cell's agent once: every run goes through it
    cancel: threading.Event     # set on Ctrl-C (the runner's too)
    busy_said: threading.Event = field(default_factory=threading.Event)  # said once


@dataclass(frozen=True)
class Measured:
    """A cell that ran (or could not): its within-run result, held in memory until its
    row's comparison is known, with the verdict and series the comparison needs, and
    where its rounds run (its directory and image)."""

    result: CellResult
    verdict: CellVerdict
    series: Series
    home: Path                  # the cell's directory (`cells/<id>/`)
    info: ImageInfo             # its image, as prepared


@dataclass(frozen=True)
class Runs:
    """Who runs in a comparison's rounds: the suspect, and before it in each round the
    row's baseline cell (B S B S), or a saved run's samples, every round's baseline (its
    code is gone: only the suspect runs again)."""

    suspect: Cell
    base: Cell | Series
    calls: int              # the calls that set the rounds' length (`compare.round_length`)
    home: Path              # the suspect's directory: its rounds run in home/rounds/
    info: ImageInfo         # the suspect's image


@dataclass(frozen=True)
class RoundsPlan:
    """The rounds a comparison needs before it can decide: the pooled comparison that
    left the doubt (its direction, "slower", "faster" or "~" on a busy host, and the
    `rounds` setting: 2 to twice that, until settled), who runs (`runs`; None where no
    round can run again: `--reanalyze` recalls the recorded ones), the most calls a
    round's run makes (`cap`; None for a leak, whose steps may slow as what it keeps
    grows) and the least (`least`), and what the decision after them starts from."""

    res: CellResult             # the suspect's within-run result
    within: CellVerdict
    pooled: Baseline
    label: str                  # the baseline's name in progress lines
    runs: Runs | None
    cap: int | None
    # The least calls each of the baseline's and the suspect's round runs makes, past
    # `cap` (`compare.least_calls`: `compare.ROUND_S` seconds of its own steps)
    least: tuple[int, int] = (0, 0)


@dataclass
class CellRun:
    """One cell on its way through the stages: each stage fills in what it found; a stage
    that settles the cell (no image, not applicable) sets `verdict` and the rest skip
    (only the last stage, run_attempts, sets it after a run)."""

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
        """Attempts that ran and were decided: an engine that went away mid-run is
        retried without spending one of the cell's `repeats` (issue 50)."""
        return len(self.attempts) - self.engine_retries
