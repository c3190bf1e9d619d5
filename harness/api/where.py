"""A checked leak's lines (`Checked.where`): the cell run again briefly under tracemalloc
(`harness explain`'s run, `explain.plan.attributed`), its sites named in the step's own
file ("test_x.py:9 test_f (CACHE.append(x))"). A budgeted check's run is bounded by its
budget: a marked test of 0.5 s whose 5 ms step leaked ran 200 warm-up calls and 294
more under tracemalloc, 2.8 s, after its 1.8 s run. Its deadline is wall seconds, so
it is the budget at the host's pace: the measured run's wall seconds per second of
its own, and twice that again, WHERE_TRIES runs in all, where the deadline ended a
run before its lines (a busy host left a 0.3 s leak's lines out in 3 of 10 runs).
"""

from __future__ import annotations

import dataclasses
import inspect
import linecache
import os
from collections.abc import Callable
from pathlib import Path

from harness.analysis.outcomes import host_took
from harness.analysis.where import summary
from harness.analysis.whererecord import Where
from harness.explain.plan import (
    AttributionFailed,
    attributed,
    floors,
    length,
    run_attributed,
    stop_room,
)
from harness.matrixfile.model import Cell
from harness.protocol.series import Series
from harness.result.model import CellResult
from harness.stages.context import Context

# A budgeted check's where run makes the calls that fit in half its budget at its
# measured run's pace slowed this many times by tracemalloc (20-120x on an allocating
# step: explain.plan), WHERE_LEAST at least, a fifth of them its warm-up; its deadline
# is the budget at the host's pace (`pace`), which ends a run slower than that: then
# twice that, WHERE_TRIES runs in all, before its lines go unsaid.
WHERE_SLOWER = 20.0
WHERE_LEAST = 10
WHERE_TRIES = 3
# The most the measured run's pace stretches the where run's deadline.
WHERE_PACE_MAX = 8.0


def within(cell: Cell, per_call: float, budget: float, deadline: float | None = None
           ) -> Cell:
    """The where run (`attributed`) bounded by the check's budget, its measured run's
    calls taking `per_call` seconds each of its own; ended at `deadline` wall seconds
    (None: the budget)."""
    s = cell.settings
    fit = int(budget / 2 / max(per_call * WHERE_SLOWER, 1e-9))
    calls = max(WHERE_LEAST, min(s.warmup + s.iterations, fit))
    warmup = min(s.warmup, calls // 5)
    return cell.with_settings(dataclasses.replace(
        s, warmup=warmup, iterations=calls - warmup,
        timeout=budget if deadline is None else deadline,
        sample_every=max(calls - warmup, warmup, 1)))


def pace(series: Series | None) -> float:
    """The measured run's wall seconds per second of its own (`outcomes.host_took`):
    1 on a quiet host, 1 where unknown, WHERE_PACE_MAX at most."""
    took = host_took(series) if series is not None else None
    if took is None or took[1] <= 0:
        return 1.0
    return min(WHERE_PACE_MAX, max(1.0, took[0] / took[1]))


def where(ctx: Context, cell: Cell, result: CellResult, step: Callable[..., object],
          outdir: Path, budget: float | None, series: Series | None = None
          ) -> tuple[str, ...]:
    """A leak's lines that grew (`series`: its measured run's, for the host's pace);
    empty where the where run failed, or ran past its deadline WHERE_TRIES times."""
    room, _ = stop_room(result) or (None, "")
    took, made = result.timings.run_s, result.end.iterations or result.summary.iterations
    whole = run_as = attributed(cell, ("heap",), took or None, made or None, room)
    per_call = (took or 0.0) / max(made or 0, 1)
    deadline = None if budget is None else budget * pace(series)
    for _ in range(WHERE_TRIES if budget is not None else 1):
        if budget is not None:
            run_as = within(whole, per_call, budget, deadline)
        ctx.progress(f"explain {cell.id}: running with --attribute heap ({length(run_as)}"
                     + (f", within {deadline:.2g} s for its {budget:g} s budget"
                        if budget is not None and deadline is not None else "") + ")")
        try:
            found, _ = run_attributed(ctx, run_as, ("heap",), outdir)
        except AttributionFailed as exc:
            ctx.progress(f"explain: {exc}")
            if exc.timed_out and deadline is not None:
                deadline *= 2
                continue
            return ()
        lines = _lines(found, step, result)
        if lines or not found.errors or deadline is None or ctx.cancel.is_set():
            return lines
        ctx.progress(f"explain {cell.id}: its deadline ended the run before its lines "
                     f"({'; '.join(found.errors.values())})")
        deadline *= 2
    return ()


def _lines(found: Where, step: Callable[..., object], result: CellResult) -> tuple[str, ...]:
    path = inspect.getsourcefile(step) or ""
    name = os.path.basename(path)

    def source(file: str, line: int) -> str | None:
        return linecache.getline(path, line).strip() or None if file == name else None

    return tuple(text for text in summary(found, name, source, floors=floors(result))
                 if " at " in text)
