"""`harness watch`'s work: sweep the suite over a repository's new tags."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from harness.app.command import hold
from harness.runtimes import Engines
from harness.signals import interruptible
from harness.stages.orchestrator import prefetch_analysis
from harness.store import RunStore
from harness.store.runs import SWEEP
from harness.sweeping.course import plan_of
from harness.watch.suite import run_plan

if TYPE_CHECKING:
    from harness.matrixfile.model import Cell, Matrix
    from harness.runtimes.base import Progress
    from harness.watch.suite import Plan, WatchOutcome


def run_suite(plan: Plan, matrix: Matrix, text: str, cells: list[Cell], out: Path,
              docker_host: str | None, progress: Progress) -> tuple[WatchOutcome, Path]:
    """Sweep the suite's cells (`text`: its matrix file) into a new directory under
    `out`; the outcome and the directory."""
    hold(prefetch_analysis())
    engines = Engines.for_matrix(matrix, matrix.runtime, docker_host)
    engines.start(cells, progress)  # no engine: exit 3 before any results directory exists
    with interruptible():
        store = RunStore.open(out, matrix.name, False)
        with engines.stopped(store.unlock):
            store.write("matrix.yaml", text)
            store.mark(SWEEP, matrix.name, str(store.root / "matrix.yaml"), plan_of(cells))
            progress(f"{len(cells)} cells, results in {store.root}")
            outcome = run_plan(plan, matrix, cells, engines.default, store, progress,
                               engines.by_host)
    return outcome, store.root
