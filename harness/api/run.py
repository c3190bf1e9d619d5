"""`harness.check`: one function as one cell of a local matrix, compared with a saved run
whose code cannot run again: each round reruns the cell against the saved statistic, both
scaled to one CPU speed by the agent's canary (so save and compare on one machine).
`Checked.where`: a brief tracemalloc rerun, up to WHERE_TRIES tries.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import linecache
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from harness import matrixfile
from harness.analysis.outcomes import host_stretched, host_took
from harness.analysis.rules import WORKERS
from harness.analysis.where import MIN_RATE, Where, named_above, one_time, summary
from harness.api.checked import Checked
from harness.api.scenario import (
    HERE,
    KWARGS,
    SCENARIO,
    PerCall,
    pickled,
    scenario_here,
    scenario_text,
)
from harness.errors import InputError, SpecError
from harness.explain import (
    MEMORY_CALLS,
    AttributionFailed,
    attributed,
    floors,
    length,
    run_attributed,
    stop_room,
)
from harness.matrixfile.entries import NOT_A_DURATION, duration_problem, parse_duration, to_word
from harness.matrixfile.model import BUDGET_CAP, Cell
from harness.preflight import compile_scenarios
from harness.protocol.series import Series
from harness.result.model import CellResult
from harness.runtimes import Engines, get_runtime
from harness.runtimes.base import AGENT_DIR, CALL_TIMEOUT_S, DEADLINE_SHARE, call_timeout
from harness.runtimes.process import runs_forked_here
from harness.stages.context import Context, Measured
from harness.stages.orchestrator import Sweep
from harness.stages.settle import against_row, run_plan
from harness.store import RunStore
from harness.store.results import save_cell
from harness.store.runs import SWEEP

if TYPE_CHECKING:
    from harness.matrixfile.model import Matrix
    from harness.store.results import Saved


Progress = Callable[[str], None]
# A check takes at most this many budgets in all, reruns included; past it, `ambiguous`.
OVERRUN = 4
# A budgeted check's warm-up spends at most this share of its budget.
WARMUP_SHARE = 0.2


def bounded(asked: Mapping[str, object], seconds: float | None) -> Mapping[str, object]:
    """A budgeted check's deadline (overrun x budget + 2 call timeouts) unless `timeout` is set."""
    overrun = asked.get("overrun")
    if seconds is None or "timeout" in asked or not isinstance(overrun, (int, float)):
        return asked
    return {**asked, "timeout": f"{overrun * seconds + 2 * CALL_TIMEOUT_S:g}s"}


def _matrix_text(script: Path, sid: str, budget: float | None, iterations: int | None,
                 params: Mapping[str, object] | None, settings: Mapping[str, object]) -> str:
    defaults: dict[str, object] = dict(settings)
    if iterations is not None:
        defaults["iterations"] = iterations
    elif budget is not None:
        defaults["budget"] = budget
    doc = {"name": "check", "runtime": "local", "defaults": defaults,
           "matrix": {"image": [sys.executable], "gpu": ["none"],
                      "scenario": [{"script": str(script), "id": sid,
                                    "params": dict(params or {})}]}}
    try:
        return yaml.safe_dump(doc, sort_keys=False)
    except yaml.YAMLError as exc:
        raise InputError(f"harness.check: params and settings must be plain data (strings, "
                         f"numbers, lists, mappings): {exc}\n  fix: pass objects to setup "
                         "through its module, not params") from None


def _said(exc: SpecError) -> InputError:
    """A matrix error of the matrix check() wrote, said as the argument it came from."""
    key = exc.path.split(".")[-1] if exc.path else ""
    arg = ("budget=" if key == "budget" else "iterations=" if key == "iterations"
           else "params=" if "params" in exc.path else f"settings[{key!r}]" if key
           else "its arguments")
    fix = f"\n  fix: {exc.fix}" if exc.fix else ""
    return InputError(f"harness.check: {arg}: {exc.problem}{fix}")


def whole_budget(settings: Mapping[str, object], iterations: int | None, save: object,
                 baseline: object) -> Mapping[str, object]:
    """A run kept or compared for step times measures its whole budget (no live `ok` stop)."""
    if iterations is not None or "min_iterations" in settings or (
            save is None and baseline is None):
        return settings

    cap = settings.get("max_iterations")
    return {**settings, "min_iterations": cap if isinstance(cap, int) else BUDGET_CAP}


def _seconds(budget: str | float | None) -> float | None:
    if budget is None:
        return None
    seconds = parse_duration(budget)
    if seconds is None:
        problem = duration_problem(budget)
        raise InputError(f"harness.check: budget={budget!r} "
                         f"{'is ' if problem == NOT_A_DURATION else ''}{problem}\n  fix: write "
                         "e.g. budget=\"2s\", \"500ms\", \"1m\" or a number of seconds")
    return seconds


@dataclass
class _Session:
    """One cell's matrix written into a directory, its engine started, its store open."""

    matrix: Matrix
    cell: Cell
    sweep: Sweep

    def measure(self) -> Measured:
        """Run and decide the cell as a sweep does, writing its result into the store."""
        s = self.cell.settings
        self.sweep.progress(f"{self.cell.id}: running (" + (
            f"{s.iterations} calls" if s.run_budget is None else
            f"for {s.run_budget:g} s, at most {s.agent_iterations:,} calls, early stop")
            + f"); {_hang_said(s.timeout)}")
        measured = self.sweep.run_cell(self.cell)
        if self.sweep.store.durable:    # kept (`out=`); else `Checked` holds it
            self.sweep.store.write_cell(measured.result)
        return measured


def _hang_said(timeout: float) -> str:
    """When a call that does not return ends a run, in words."""
    later, first = call_timeout(timeout), DEADLINE_SHARE * timeout
    return (f"a call that does not return in {later:g} s" + (
        f" (the first in {first:g} s)" if first > later else "")
        + " ends the run, saying where it waits")


@contextlib.contextmanager
def _session(text: str, matrix_file: Path, root: Path, progress: Progress,
             durable: bool) -> Iterator[_Session]:
    matrix_file.write_text(text, encoding="utf-8")
    try:
        matrix = matrixfile.load(matrix_file)
    except SpecError as exc:
        raise _said(exc) from None
    cells = [cell.with_settings(replace(cell.settings, warmup_share=WARMUP_SHARE))
             if cell.settings.run_budget is not None else cell for cell in matrix.cells]
    compile_scenarios(cells)
    engines = Engines.for_matrix(matrix, "local")
    # Each run forked from a warm interpreter that imported the agent and step once.
    engines.default.run_warm()
    engines.start(cells)
    store = RunStore(root, durable)
    if durable:     # a directory kept (`out=`) reads as a sweep's; a temporary one is not
        store.lock()
    sweep = Sweep(matrix, engines.default, store, progress)
    try:
        if durable:
            store.write("matrix.yaml", text)
            store.mark(SWEEP, matrix.name, str(matrix_file))
        yield _Session(matrix, cells[0], sweep)
    finally:
        try:
            sweep.images.close()
            engines.stop()
        finally:
            if durable:
                store.unlock()


def check(step: Callable[..., object], setup: Callable[..., object] | None = None, *,
          budget: str | float | None = "3s", iterations: int | None = None,
          params: Mapping[str, object] | None = None,
          kwargs: Mapping[str, object] | PerCall | None = None,
          settings: Mapping[str, object] | None = None,
          baseline: Saved | None = None, save: Saved | None = None,
          out: str | os.PathLike[str] | None = None,
          progress: Progress | bool = False, here: bool = False) -> Checked:
    """Run `step` over and over in a child process (forked from a warm interpreter) as one cell
    of a local sweep, and decide: leak, plateau, slowdown, ok, crash, ...

    Args:
        step, setup: Module-level `step()`, `step(state)` or `step(**kwargs)`; `setup(params)`.
        budget, iterations: "3s", "500ms", "1m" or seconds, warm-up included; or fixed calls.
        params, kwargs: `setup`'s params; each call's keyword arguments (pickled), or `Calls`.
        settings: Other run settings of a matrix's `defaults:` (docs/matrix.md).
        baseline, save, out: A saved run to compare with; where to save; where to keep results.
        progress, here: Lines on stderr (or a callable); fork this very process, for steps
            not importable or picklable (POSIX).

    Raises: InputError: `step`/`setup` not importable at module level, a bad argument, no
    baseline; EnvironmentUnavailable: the interpreter cannot be run.
    """
    seconds = None if iterations is not None else _seconds(budget)
    if iterations is not None and (type(iterations) is not int or iterations < 1):
        raise InputError(f"harness.check: iterations={iterations!r} must be a whole number "
                         "of calls, 1 or more\n  fix: e.g. iterations=2000, or a budget=")
    if params is not None and not (isinstance(params, Mapping)
                                   and all(isinstance(k, str) for k in params)):
        raise InputError(f"harness.check: params={params!r} must be a mapping of names to "
                         "values\n  fix: e.g. params={'batch': 8}; setup(params) reads "
                         "params['batch']")
    base = None
    if baseline is not None:
        base = baseline.read()
        if base is None:
            raise InputError(f"harness.check: no saved run at {baseline.where} to compare "
                             "with\n  fix: run it once with save=... first")
    if here and not hasattr(os, "fork"):
        raise InputError("harness.check: here=True runs a fork of this process, and this "
                         "platform cannot fork\n  fix: pass module-level functions and "
                         "arguments that pickle, without here=True")
    text, key = scenario_here(step, setup, kwargs) if here else (
        scenario_text(step, setup, kwargs), None)
    try:
        return _check(text, step, seconds, iterations, params, kwargs, settings, base,
                      baseline, save, out, progress, key)
    finally:
        HERE.pop(key or "", None)


def _load() -> float | None:
    """The host's one-minute load average per CPU (None where it cannot be read)."""
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        return None


def _check(text: str, step: Callable[..., object], seconds: float | None,
           iterations: int | None, params: Mapping[str, object] | None,
           kwargs: Mapping[str, object] | PerCall | None,
           settings: Mapping[str, object] | None,
           base: tuple[CellResult, Series] | None, baseline: Saved | None,
           save: Saved | None, out: str | os.PathLike[str] | None,
           progress: Progress | bool, here: str | None) -> Checked:
    say: Progress = (progress if callable(progress) else _stderr if progress
                     else _quiet)
    sid = _scenario_id(step)
    started = time.monotonic()
    with _workdir(out) as work:
        script = work / SCENARIO
        script.write_text(text, encoding="utf-8")
        if kwargs is not None and here is None:
            (work / KWARGS).write_bytes(pickled(kwargs))
        asked = whole_budget(settings or {}, iterations, save, baseline)
        if seconds is not None and "overrun" not in asked:
            asked = {**asked, "overrun": OVERRUN}
        asked = bounded(asked, seconds)
        matrix = _matrix_text(script, sid, seconds, iterations, params, asked)
        root = work / "run"
        # here: forked now, before the session starts a thread of its own
        with (runs_forked_here(AGENT_DIR / "forkserver.py") if here
              else contextlib.nullcontext()), \
                _session(matrix, work / "matrix.yaml", root, say, out is not None) as s:
            measured = s.measure()
            result = measured.result
            if base is not None and baseline is not None:
                result = against_saved(s.sweep.ctx, s.cell, measured, base[0], base[1],
                                       baseline.label)
            if save is not None:
                save_cell(root, s.cell.id, save, result)
            lines = where(s.sweep.ctx, s.cell, result, step, root / "where", seconds,
                          measured.series) if result.verdict == "leak" else ()
        return Checked(result, root if out is not None else None, lines,
                       host_stretched(measured.series), time.monotonic() - started, _load())


def warm_ahead(steps: Sequence[tuple[Callable[..., object], Sequence[str]]],
               budget: str | float | None, iterations: int | None,
               settings: Mapping[str, object]) -> None:
    """Start now what the first check of each step would start (interpreter, warm server
    with the steps' modules), so a suite's first marked test costs what later ones do.

    Raises:
        HarnessError: as a check of the first step would.
    """
    seconds = None if iterations is not None else _seconds(budget)
    asked = dict(settings)
    if seconds is not None and "overrun" not in asked:
        asked["overrun"] = OVERRUN
    with _workdir(None) as work:
        scripts = []
        for n, (step, names) in enumerate(steps):
            scripts.append(work / f"{n}{SCENARIO}")
            scripts[-1].write_text(scenario_text(step, None, dict.fromkeys(names)),
                                   encoding="utf-8")
        text = _matrix_text(scripts[0], _scenario_id(steps[0][0]), seconds, iterations,
                            None, bounded(asked, seconds))
        (work / "matrix.yaml").write_text(text, encoding="utf-8")
        try:
            matrix = matrixfile.load(work / "matrix.yaml")
        except SpecError as exc:
            raise _said(exc) from None
        get_runtime(matrix.runtime).warm_ahead(matrix.cells[0], scripts)


def _scenario_id(fn: Callable[..., object]) -> str:
    return to_word(getattr(fn, "__name__", "step"), "_").strip("._") or "step"


@contextlib.contextmanager
def _workdir(out: str | os.PathLike[str] | None) -> Iterator[Path]:
    if out is not None:
        base = Path(out).absolute()
        base.mkdir(parents=True, exist_ok=True)
        yield Path(tempfile.mkdtemp(prefix="check-", dir=base))
        return
    with tempfile.TemporaryDirectory(prefix="harness-check-") as tmp:
        yield Path(tmp)


def _quiet(text: str) -> None:
    return None


def _stderr(text: str) -> None:
    print(f"harness: {text}", file=sys.stderr, flush=True)


# A cell against a saved run of an earlier version of its code
def against_saved(ctx: Context, cell: Cell, measured: Measured, saved: CellResult,
                  saved_series: Series, label: str) -> CellResult:
    """`measured` decided against the saved run `saved`; nothing is written."""
    return run_plan(ctx, against_row(ctx.cfg, cell, measured, saved_series, saved,
                                     saved_series, label))


# A checked leak's lines. The where run makes the calls that fit in half the budget,
# assuming tracemalloc slows a call this many times; WHERE_LEAST at least.
WHERE_SLOWER = 20.0
WHERE_LEAST = 10
WHERE_TRIES = 3
# The most the measured run's pace stretches the where run's deadline.
WHERE_PACE_MAX = 8.0
# What a site must grow by in all to be named: a one-time allocation is bounded in bytes,
# so more calls name a smaller leak per call.
SITE_BYTES = MIN_RATE * MEMORY_CALLS
# How the one line begins where no line is named (its reason follows).
NO_LINE = "heap: no line named: "
WHERE_CALLS_MAX = 200_000
# A site named grows at most this many times the leak's own rate: faster is a one-time
# allocation divided by few calls.
MOST_OVER = 1.5


def within(cell: Cell, per_call: float, budget: float, deadline: float | None = None,
           wanted: int = 0) -> Cell:
    """The where run bounded by the budget at `per_call` s a call, ended at `deadline`."""
    s = cell.settings
    fit = int(budget / 2 / max(per_call * WHERE_SLOWER, 1e-9))
    calls = max(WHERE_LEAST, min(max(s.warmup + s.iterations, wanted), fit))
    warmup = min(s.warmup, calls // 5)
    return cell.with_settings(dataclasses.replace(
        s, warmup=warmup, iterations=calls - warmup,
        timeout=budget if deadline is None else deadline,
        sample_every=max(calls - warmup, warmup, 1)))


def pace(series: Series | None) -> float:
    """The measured run's wall seconds per own second: 1 if unknown, WHERE_PACE_MAX at most."""
    took = host_took(series) if series is not None else None
    if took is None or took[1] <= 0:
        return 1.0
    return min(WHERE_PACE_MAX, max(1.0, took[0] / took[1]))


def where(ctx: Context, cell: Cell, result: CellResult, step: Callable[..., object],
          outdir: Path, budget: float | None, series: Series | None = None
          ) -> tuple[str, ...]:
    """A leak's lines that grew, or one line saying why none is named (the where run
    failed, timed out WHERE_TRIES times, or no site grew past a one-time allocation)."""
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
        # deadline hit or workers unheard: once more, twice as long
        ctx.progress(f"explain {cell.id}: no line named ({'; '.join(found.errors.values())}); "
                     "running it again")
        said = lines if "workers" in found.errors else said
        deadline *= 2
    return said


def _lines(found: Where, step: Callable[..., object], result: CellResult) -> tuple[str, ...]:
    """The sites of the step's file that grew; else one line saying why none."""
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
        # the test's own lines, not one-time reads, not above the leak's own rate
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
