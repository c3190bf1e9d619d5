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
import math
import os
from collections.abc import Callable
from pathlib import Path

from harness.analysis.outcomes import host_took
from harness.analysis.rules import WORKERS
from harness.analysis.where import MIN_RATE, Where, named_above, one_time, summary
from harness.explain.plan import (
    MEMORY_CALLS,
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
from harness.sweeping.context import Context

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
# What a site must grow by in all to be named: a one-time allocation is bounded in
# bytes, not per call, so a where run of more calls names a smaller leak per call
# (explain's MIN_RATE over its MEMORY_CALLS); a leak's where run makes the calls in
# which the measured rate grows by twice that, where its budget has room.
SITE_BYTES = MIN_RATE * MEMORY_CALLS
# How the one line begins where no line is named (its reason follows).
NO_LINE = "heap: no line named: "
WHERE_CALLS_MAX = 200_000
# A site named grows at most this many times the leak's own rate (the heap's, from the
# measured run): one faster is a one-time allocation a short run divides by few calls.
MOST_OVER = 1.5


def within(cell: Cell, per_call: float, budget: float, deadline: float | None = None,
           wanted: int = 0) -> Cell:
    """The where run (`attributed`) bounded by the check's budget, its measured run's
    calls taking `per_call` seconds each of its own; ended at `deadline` wall seconds
    (None: the budget); `wanted` calls where more than the run's own fit."""
    s = cell.settings
    fit = int(budget / 2 / max(per_call * WHERE_SLOWER, 1e-9))
    calls = max(WHERE_LEAST, min(max(s.warmup + s.iterations, wanted), fit))
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
    else one line saying why none is named: the where run failed, ran past its deadline
    WHERE_TRIES times, or no site of the step's file grew enough to tell from a
    one-time allocation."""
    room, _ = stop_room(result) or (None, "")
    took, made = result.timings.run_s, result.end.iterations or result.summary.iterations
    whole = run_as = attributed(cell, ("heap",), took or None, made or None, room)
    # the measured phase's own seconds a call: the run's also hold its start and exit
    per_call = (result.timings.measure_s or took or 0.0) / max(made or 0, 1)
    deadline = None if budget is None else budget * pace(series)
    # what the where run reads: tracemalloc's heap, in the workers where they carry it
    heap = result.memory.get(WORKERS if result.carrier == WORKERS else "heap")
    rate = heap.slope if heap is not None else 0.0
    wanted = min(WHERE_CALLS_MAX, int(2 * SITE_BYTES / rate)) if rate > 0 else 0
    said: tuple[str, ...] = (f"{NO_LINE}its run under tracemalloc ran past its deadline",)
    for _ in range(WHERE_TRIES if budget is not None else 1):
        if budget is not None:
            run_as = within(whole, per_call, budget, deadline, wanted)
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
            return (f"{NO_LINE}its run under tracemalloc failed ({exc})",)
        lines = _lines(found, step, result)
        if not lines[0].startswith(NO_LINE) or not found.errors or deadline is None \
                or ctx.cancel.is_set():
            return lines
        # its deadline ended the run before its lines, or worker processes it drove did
        # not say what they hold: once more, its deadline twice as long
        ctx.progress(f"explain {cell.id}: no line named ({'; '.join(found.errors.values())}); "
                     "running it again")
        said = lines if "workers" in found.errors else said
        deadline *= 2
    return said


def _lines(found: Where, step: Callable[..., object], result: CellResult) -> tuple[str, ...]:
    """The sites of the step's file that grew; else one line saying why none: the
    least a site must grow by over the run's calls (SITE_BYTES), or its floor."""
    path = inspect.getsourcefile(step) or ""
    name = os.path.basename(path)

    def source(file: str, line: int) -> str | None:
        return linecache.getline(path, line).strip() or None if file == name else None

    least = max(1.0, min(MIN_RATE, SITE_BYTES / max(found.calls, 1)))
    workers = result.carrier == WORKERS
    part = "workers" if workers else "heap"
    heap = result.memory.get(WORKERS if workers else "heap")
    most = MOST_OVER * heap.slope if heap is not None and heap.slope > 0 else math.inf

    def keep(key: str, rate: float) -> bool:
        # the test's own line, not the plugin's wrapper around it (in a worker, the
        # task's, wherever it is written); not a one-time read (linecache, an import);
        # not above the leak's own rate (what a short run makes of a one-time allocation)
        own = not key.startswith("<") if workers else key.startswith(f"{name}:")
        return own and not one_time(key) and rate <= most

    lines = tuple(text for text in summary(found, name, source, floors=floors(result),
                                           least=least, keep=keep, parts=(part,))
                  if " at " in text)
    if lines:
        return lines
    if workers and "workers" not in found.sites:
        why = found.errors.get("workers") or "none of them was followed"
        return (f"{NO_LINE}the growth is in the worker processes the step drives, and "
                f"no worker said what it holds ({why})",)
    if workers and "workers" in found.errors:
        return (f"{NO_LINE}the growth is in the worker processes the step drives: "
                f"{found.errors['workers']}",)
    above = named_above(part, floors(result), least)
    where = "a worker's task" if workers else f"{name}"
    return (f"{NO_LINE}no site of {where} grew {above:,.0f} B/call or more in "
            f"the {found.calls:,} calls run again under tracemalloc (less could be a "
            "one-time allocation); a longer budget makes more calls",)
