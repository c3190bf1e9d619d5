"""`harness.check`: one function run as one cell of a local matrix, the sweep's way."""

from __future__ import annotations

import contextlib
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
from harness.analysis.outcomes import host_took
from harness.api.checked import Checked
from harness.api.saved import against_saved
from harness.api.scenario import (
    HERE,
    KWARGS,
    SCENARIO,
    PerCall,
    pickled,
    scenario_here,
    scenario_text,
)
from harness.api.where import where
from harness.errors import InputError, SpecError
from harness.matrixfile.entries import NOT_A_DURATION, duration_problem, parse_duration, to_word
from harness.matrixfile.model import BUDGET_CAP
from harness.preflight import compile_scenarios
from harness.runtimes import Engines, get_runtime
from harness.runtimes.base import AGENT_DIR, CALL_TIMEOUT_S, DEADLINE_SHARE, call_timeout
from harness.runtimes.process import runs_forked_here
from harness.store import RunStore
from harness.store.runs import SWEEP
from harness.store.saved import save_cell
from harness.sweeping.orchestrator import Sweep

if TYPE_CHECKING:
    from harness.matrixfile.model import Cell, Matrix
    from harness.protocol.series import Series
    from harness.result.model import CellResult
    from harness.store.saved import Saved
    from harness.sweeping.context import Measured

Progress = Callable[[str], None]
# A check (a marked test) takes at most this many budgets in all, its runs again
# included, unless its settings say otherwise: a budget too short for a verdict ends
# `ambiguous`, saying the budget that would decide (`sweeping.measure.too_short`).
OVERRUN = 4
# A budgeted check's warm-up spends at most this share of its budget and its measured
# phase the rest (RunSettings.warmup_share): a marked test costs its budget, where 200
# warm-up calls of 3 ms before a 0.5 s budget cost it twice (issue 62).
WARMUP_SHARE = 0.2


def bounded(asked: Mapping[str, object], seconds: float | None) -> Mapping[str, object]:
    """A budgeted check's deadline, unless its settings set `timeout`: its `overrun`
    bound (overrun x budget) plus two call timeouts (the setup's, a step's), a wide
    margin past what a run that ends takes, so a run that hangs (a step waiting on a
    thread a fork lost) ends `timeout` in minutes, not at the matrix's 20."""
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
    """A run kept or compared for its step times measures its whole budget: a live `ok`
    on memory would stop it after a few hundred calls, too few step times to compare
    (unless the caller set `min_iterations` or a fixed length)."""
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
        """The cell run and decided as a sweep runs each cell (`Sweep.run_cell`), its
        result written into the store."""
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
    """When a call that does not return ends a run, in words: the agent's call timeout,
    and the first call's (it may compile: it ends only as the deadline nears)."""
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
    # One check after another (a test suite's marked tests): each run forked from a warm
    # interpreter that imported the agent and the step's module once, where it can be.
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
    """Run `step` over and over in a child process, as one cell of a local sweep, and
    decide: leak, plateau, slowdown, ok, crash, ... The child is forked from a warm
    interpreter kept for this process, which imported `step`'s module once (docs/pytest.md,
    "One warm interpreter").

    Args:
        step: A module-level function. Called as `step()` without `setup`, as
            `step(state)` with it, as `step(**kwargs)` with `kwargs`.
        setup: A module-level function, called once before the measured calls as
            `setup(params)` (or `setup()`); what it returns is `state`.
        budget: How long to run ("3s", "500ms", "1m" or seconds), its warm-up (a
            fifth of it at most) included: the run stops earlier once the verdict is
            certain, and runs again longer when it is
            ambiguous (a cache still filling, say), all its runs within `overrun`
            budgets (4 unless `settings` set it): past that it ends `ambiguous`, saying
            the budget that would decide.
        iterations: A fixed number of calls instead of a budget.
        params: Plain data handed to `setup(params)`.
        kwargs: Keyword arguments for every call of `step` (pickled, loaded once in the
            child before the measured calls); or the pytest plugin's fixture values
            and fixtures, made again for every call (`harness.pytestcall.Calls`).
        settings: Other run settings of a matrix's `defaults:` (docs/matrix.md):
            `{"heap": "stock", "warmup": 50, "timeout": "2m"}`.
        baseline: A saved run (`harness.store.saved.Saved`) to compare step times and
            peak memory with: the verdict can then be `regression` or `suspected`
            (`harness.api.saved` says how the comparison is confirmed).
        save: Where to keep this run (result.json and samples.jsonl) as a baseline for
            later runs.
        out: Keep the results directory under this folder (`Checked.root`); by default
            it is a temporary one, removed before returning.
        progress: True prints the sweep's progress lines on stderr; or a callable.
        here: Run each run as a fork of this process as it stands when `check` is
            called (POSIX), step, setup and kwargs as they are here, none imported by
            name or pickled: a lambda, a closure, a method, arguments that cannot be
            pickled (the pytest plugin's test whose arguments cannot be sent). Python's
            objects are malloc's in the run, as in a fresh one; glibc's tunables are this
            process's.

    Returns:
        The cell's result and its verdict in words (`Checked`).

    Raises:
        InputError: `step` or `setup` is not an importable module-level function, an
            argument is not what it should be, or `baseline` names no saved run.
        EnvironmentUnavailable: the interpreter cannot be run.
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
                       host_took(measured.series), time.monotonic() - started, _load())


def warm_ahead(steps: Sequence[tuple[Callable[..., object], Sequence[str]]],
               budget: str | float | None, iterations: int | None,
               settings: Mapping[str, object]) -> None:
    """What the first check of each step (with keyword arguments of those names) would
    start in its run, started now: its interpreter found, and the warm server of its
    environment (as `budget`, `iterations` and `settings` make it) started with each
    step's module imported (the runtime's `warm_ahead`). The pytest plugin's, once its
    session's tests are collected: a suite's first marked test then costs what its later
    ones do, the server's start and the test module's import outside its clock.

    Raises:
        HarnessError: as a check of the first step would (and says, when it runs).
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
        runtime = get_runtime(matrix.runtime)
        runtime.run_warm()
        runtime.warm_ahead(matrix.cells[0], scripts)


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
