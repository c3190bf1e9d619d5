"""A checked leak's lines (`Checked.where`): the cell run again briefly under tracemalloc
(`harness explain`'s run, `explain.plan.attributed`), its sites named in the step's own
file ("test_x.py:9 test_f (CACHE.append(x))"). A budgeted check's run is bounded by its
budget: a marked test of 0.5 s whose 5 ms step leaked ran 200 warm-up calls and 294
more under tracemalloc, 2.8 s, after its 1.8 s run.
"""

from __future__ import annotations

import dataclasses
import inspect
import linecache
import os
from collections.abc import Callable
from pathlib import Path

from harness.analysis.where import summary
from harness.explain.plan import (
    AttributionFailed,
    attributed,
    floors,
    length,
    run_attributed,
    stop_room,
)
from harness.matrixfile.model import Cell
from harness.result.model import CellResult
from harness.stages.context import Context

# A budgeted check's where run makes the calls that fit in half its budget at its
# measured run's pace slowed this many times by tracemalloc (20-120x on an allocating
# step: explain.plan), WHERE_LEAST at least, a fifth of them its warm-up; its deadline
# is the budget, which ends a run slower than that (its lines then not said).
WHERE_SLOWER = 20.0
WHERE_LEAST = 10


def within(cell: Cell, per_call: float, budget: float) -> Cell:
    """The where run (`attributed`) bounded by the check's budget, its measured run's
    calls taking `per_call` seconds each."""
    s = cell.settings
    fit = int(budget / 2 / max(per_call * WHERE_SLOWER, 1e-9))
    calls = max(WHERE_LEAST, min(s.warmup + s.iterations, fit))
    warmup = min(s.warmup, calls // 5)
    return cell.with_settings(dataclasses.replace(
        s, warmup=warmup, iterations=calls - warmup, timeout=budget,
        sample_every=max(calls - warmup, warmup, 1)))


def where(ctx: Context, cell: Cell, result: CellResult, step: Callable[..., object],
          outdir: Path, budget: float | None) -> tuple[str, ...]:
    """A leak's lines that grew; empty where the where run failed (or ran past its
    deadline)."""
    room, _ = stop_room(result) or (None, "")
    took, made = result.timings.run_s, result.end.iterations or result.summary.iterations
    run_as = attributed(cell, ("heap",), took or None, made or None, room)
    if budget is not None:
        run_as = within(run_as, (took or 0.0) / max(made or 0, 1), budget)
    ctx.progress(f"explain {cell.id}: running with --attribute heap ({length(run_as)}"
                 + (f", within its {budget:g} s budget" if budget is not None else "") + ")")
    try:
        found, _ = run_attributed(ctx, run_as, ("heap",), outdir)
    except AttributionFailed as exc:
        ctx.progress(f"explain: {exc}")
        return ()
    path = inspect.getsourcefile(step) or ""
    name = os.path.basename(path)

    def source(file: str, line: int) -> str | None:
        return linecache.getline(path, line).strip() or None if file == name else None

    return tuple(text for text in summary(found, name, source, floors=floors(result))
                 if " at " in text)
