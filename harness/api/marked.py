"""A test marked `harness_leaks` or `harness_time`, run as a cell: what the pytest plugin
(`harness/pytest_plugin.py`) calls once such a test runs, so an unmarked session imports
nothing of harness. The marker's arguments and the test's fixtures become `check`'s.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import os
import pickle
import re
import sys
import warnings
from collections.abc import Sequence
from typing import NoReturn

import pytest

from harness.analysis.kinds import UNDECIDED
from harness.analysis.memory import RUNS_NO_MORE
from harness.analysis.rules import BUSY_HOST
from harness.api.checked import Checked
from harness.api.run import check, warm_ahead, whole_budget
from harness.api.scenario import unreachable
from harness.errors import HarnessError
from harness.matrixfile.entries import parse_duration
from harness.protocol.ingest import frames
from harness.pytestcall import (
    FRESH_MOST,
    LEAKS,
    PROPERTY,
    RAN_ON,
    RUNNING_ON,
    SAVED_DIR,
    TIME,
    TOOK,
    Calls,
    Made,
    RunOn,
    changeable,
    made_for,
)
from harness.result.model import AgentError
from harness.runtimes.base import AGENT_DIR
from harness.runtimes.process import forkserver
from harness.stages.measure import AS_READ
from harness.store.results import Saved, key_of

# The budget an `ambiguous` check's reason says would decide (`stages.measure.too_short`).
WANTS = re.compile(r"set budget >= ([0-9.]+)s")


def _fail(text: str) -> NoReturn:
    pytest.fail(text, pytrace=False)


def run(item: pytest.Function, marks: list[pytest.Mark], timed: bool) -> None:
    """The marked test run as a cell; a bad verdict fails it with its words."""
    fn = item.obj
    budget, iterations, settings = _arguments(item, marks)
    kwargs, here = _fixtures(item, fn)
    if here is None:
        here = (f"it is a method of class {item.cls.__name__}" if item.cls is not None
                else unreachable(fn))
    if here is not None and not hasattr(os, "fork"):
        _fail(f"harness: {item.name}: {here}, and this platform cannot fork pytest's "
              "process to run it\n  fix: make it a module-level test function")
    if here is not None:
        # its fork starts as a fresh child would (`pytestcall.as_a_fresh_child`)
        kwargs = dataclasses.replace(kwargs, forked=True) if isinstance(kwargs, Calls) \
            else Calls(kwargs, b"", {}, forked=True)
    save = compare = None
    note = ""
    if timed:
        save, compare, note = _saved(item)
        # A time check measures its whole budget, saved or compared or neither.
        settings = dict(whole_budget(settings, iterations, True, None))
    seconds = parse_duration(budget) if budget is not None else None
    run_on = item.config.stash.get(RUNNING_ON, None)
    if seconds is not None and "overrun" not in settings and run_on is not None:
        overrun = run_on.overrun_for(seconds)
        if overrun is None:
            item.user_properties.append((RAN_ON, "short 0"))
        else:
            settings = {**settings, "overrun": overrun}
    got = problem = None
    try:
        got = check(fn, kwargs=kwargs, budget=budget, iterations=iterations,
                    settings=settings, baseline=compare, save=save, here=here is not None)
    except HarnessError as exc:
        problem = as_marker(str(exc), marks[-1].name if marks else "harness_leaks")
    if got is None:     # failed outside the except: no "during handling" chain is shown
        _fail(f"harness: {item.name}: {problem}")
    _ran_on(item, got, run_on)
    _warnings_shown(got)
    _outcome(got.result.end.error)
    once = _runs_once(got)
    if once is not None:
        item.user_properties.append((PROPERTY, once))
        if item.config.getoption("harness_strict"):
            _fail(f"harness: {once}{ONCE_FIX}\n{got.traceback}")
        item.add_report_section("call", PROPERTY, f"harness: {once}\n")
        _warn(item, f"harness: {once}; passed: its first call passed, as pytest's one call "
              f"would, and nothing was measured{ONCE_FIX}")
        return
    _verdict(item, got, marks, note)


def _warnings_shown(got: Checked) -> None:
    """Re-raise the child's warnings at their own file and line, for pytest's summary."""
    info = got.result.end.info or {}
    shown = info.get("warnings")
    for entry in shown if isinstance(shown, list) else ():
        if not (isinstance(entry, list) and len(entry) == 5):
            continue
        module, name, text, filename, lineno = entry
        warnings.warn_explicit(str(text), _category(str(module), str(name)), str(filename),
                               lineno if isinstance(lineno, int) else 0)


def _category(module: str, name: str) -> type[Warning]:
    """The warning's class by module and name where this process has it; else UserWarning."""
    found = getattr(sys.modules.get(module), name, None) if "." not in name else None
    return found if isinstance(found, type) and issubclass(found, Warning) else UserWarning


def _ran_on(item: pytest.Function, got: Checked, run_on: RunOn | None) -> None:
    """Spend the test's reruns from the session's allowance and keep its times for the summary."""
    if got.took is not None:
        item.user_properties.append((TOOK, f"{got.took[0]:.3f} {got.took[1]:.3f}"))
    again = got.result.attempts[1:]
    if not again:
        return
    extra = sum(a.seconds for a in again)
    if run_on is not None:
        run_on.spent += extra
    how = "undecided" if got.verdict in UNDECIDED else "decided"
    item.user_properties.append((RAN_ON, f"{how} {extra:.3f}"))


def ahead(items: Sequence[pytest.Item]) -> None:
    """Before a session's first test, start the warm server its marked tests fork from (with
    the first marked test's module imported) and load the agent here, so the first marked
    test costs what later ones do. Failures are left for the tests to say."""
    with contextlib.suppress(OSError, ImportError):
        forkserver(AGENT_DIR / "forkserver.py")
    for item in items:
        marks = [m for m in (item.get_closest_marker(LEAKS), item.get_closest_marker(TIME))
                 if m is not None]
        if not marks or not isinstance(item, pytest.Function) or item.cls is not None or (
                unreachable(item.obj) is not None):
            continue
        with contextlib.suppress(HarnessError, OSError, TypeError, ValueError,
                                 pytest.fail.Exception):
            names = list(inspect.signature(item.obj).parameters)
            warm_ahead([(item.obj, names)], *_arguments(item, marks))
        return


# How a test that runs once only is fixed (`_runs_once`).
ONCE_FIX = ("\n  fix: let each call leave what it changes as it found it (a `monkeypatch` "
            "fixture's changes are undone after every call), or take the marker off")


def _runs_once(got: Checked) -> str | None:
    """"runs once only: call 2 failed: ..." where a first call passed and the second
    failed (the test changed what it runs on); else None."""
    error = got.result.end.error
    if got.verdict != "crash" or error is None or error.call != 2:
        return None
    found = frames(error.traceback)
    where = f" at {found[-1].path.rsplit('/', 1)[-1]}:{found[-1].line}" if found else ""
    return f"runs once only: call 2 failed: {error.type or 'an error'}{where}"


def _warn(item: pytest.Function, text: str) -> None:
    """A warning that stands at the test's file and line, not at harness's own."""
    item.warn(pytest.PytestWarning(text))


# The words of a sweep that name its command line and matrix, as the marker names them.
MARKER_RUNS_NO_MORE = "(it runs no more: raise the marker's budget= or iterations= for it)"
# The tail of a decided verdict's reason saying why it was not run again (`measure.unrun`).
_AS_READ = re.compile(rf"; {re.escape(AS_READ)} [^;]*")


def marker_words(text: str, decided: bool) -> str:
    """A verdict's words with the marker's arguments where a sweep names its command line."""
    text = text.replace(RUNS_NO_MORE, MARKER_RUNS_NO_MORE)
    return _AS_READ.sub("", text) if decided else text


def fix_for(reason: str, rule: str, budget: float | None, mark: str) -> str:
    """An undecided test's fix line: the budget that would decide, a quieter host, or 2x."""
    wants = WANTS.search(reason)
    if wants and (budget is None or float(wants.group(1)) > budget):
        return f"\n  fix: run longer, e.g. @pytest.mark.{mark}(budget=\"{wants.group(1)}s\")"
    if rule == BUSY_HOST:
        return ("\n  fix: run it again on a quieter machine (a longer budget is no cure for "
                "a busy host)")
    return (f"\n  fix: run longer, e.g. @pytest.mark.{mark}(budget="
            f"\"{max(10.0, 2 * budget) if budget else 10.0:g}s\")")


def _verdict(item: pytest.Function, got: Checked, marks: list[pytest.Mark],
             note: str) -> None:
    """The test's end: passed, passed with a warning (undecided), or failed with its words."""
    busy = got.busy if not got.ok else ""
    text = marker_words(str(got), got.verdict not in UNDECIDED) + "".join(
        f"; {more}" for more in (note, busy) if more)
    if got.floor is not None:
        item.user_properties.append(("harness_floor_bytes_per_call", round(got.floor, 1)))
    item.user_properties.append((PROPERTY, text))
    budget = _arguments(item, marks)[0]
    fix = fix_for(got.reason, got.rule, parse_duration(budget) if budget is not None
                  else None, marks[-1].name)
    # `suspected` passes, as a sweep exits 0; undecided passes with a warning, as a
    # sweep's exit 4 is not a bad cell's 1 (`--harness-strict` fails it).
    if got.ok or got.verdict == "suspected":   # a failure says it in its message
        item.add_report_section("call", PROPERTY, f"harness: {text}\n")
    elif got.verdict in UNDECIDED and not item.config.getoption("harness_strict"):
        item.add_report_section("call", PROPERTY, f"harness: {text}\n")
        _warn(item, f"harness: undecided, passed: {text}{fix}")
    else:
        more = (fix if got.verdict in UNDECIDED
                else f"\n{got.traceback}" if got.traceback else "")
        # a leak: where it grew, from a short run under tracemalloc
        more += "".join(f"\n  {line}" for line in got.where)
        _fail(f"harness: {text}{more}")


def _outcome(error: AgentError | None) -> None:
    """A skip or xfail the test raised in its child ends the test as pytest would."""
    if error is not None and error.type == "Skipped":
        pytest.skip(error.message)
    if error is not None and error.type == "XFailed":
        pytest.xfail(error.message)


def as_marker(text: str, mark: str) -> str:
    """`harness.check`'s refusal of an argument in the marker's words."""
    text = re.sub(r"^harness\.check: settings\['(\w+)'\]", rf"@pytest.mark.{mark}(\1=...)",
                  text)
    return re.sub(r"^harness\.check: ", f"@pytest.mark.{mark}: ", text)


def _arguments(item: pytest.Function, marks: list[pytest.Mark]
               ) -> tuple[str | float | None, int | None, dict[str, object]]:
    """(budget, iterations, other settings) from the markers (the closest last)."""
    budget: str | float | None = "2s"
    iterations = None
    settings: dict[str, object] = {}
    for mark in marks:
        if len(mark.args) > 1:
            _fail(f"harness: {item.name}: @pytest.mark.{mark.name} takes one positional "
                  f"argument, the budget; got {mark.args!r}\n  fix: "
                  f"@pytest.mark.{mark.name}(budget=\"2s\", warmup=50)")
        given = dict(mark.kwargs)
        if mark.args:
            given.setdefault("budget", mark.args[0])
        if "budget" in given:
            budget = given.pop("budget")
        if "iterations" in given:
            iterations = given.pop("iterations")
            budget = None
        settings.update(given)
    return budget, iterations, settings


def _fixtures(item: pytest.Function, fn: object
              ) -> tuple[dict[str, object] | Calls, str | None]:
    """The test's arguments as pytest set them up (`Calls`), and why the test must run as a
    fork of pytest's process (None: all pickle and no fixture used `monkeypatch`)."""
    try:
        names = list(inspect.signature(fn).parameters)   # type: ignore[arg-type]
    except (TypeError, ValueError):
        names = []
    kwargs = {n: item.funcargs[n] for n in names if n in item.funcargs}
    made: dict[str, Made] = {}
    fresh: dict[str, object] = {}
    copied: dict[str, object] = {}
    here: list[str] = []
    for name, value in kwargs.items():
        found = made_for(value, item.config)
        if found is not None:
            here += _unused(item, name, value)
            made[name] = found
            continue
        fresh_one = _function_scoped(item, name) and changeable(value)
        try:
            blob = pickle.dumps(value)
            if fresh_one and len(blob) <= FRESH_MOST:
                fresh[name] = value
            continue
        except Exception as exc:   # pickling raises what the object's reducer raises
            why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        if not hasattr(os, "fork"):
            _fail(f"harness: {item.name}: {argument_named(item, name)} "
                  f"({type(value).__name__}) cannot be sent to the child process that runs "
                  f"the test ({why}), and this platform cannot fork pytest's process to run "
                  f"it with its arguments as they are\n  fix: {_fix(item, name)}")
        here.append(f"{argument_named(item, name)} cannot be pickled ({why})")
        if fresh_one and _copies(value):
            copied[name] = value
    first = here[0] if here else None
    if not made and not fresh and not copied:
        return kwargs, first
    shared = {n: v for n, v in kwargs.items() if n not in made and n not in fresh
              and n not in copied}
    return Calls(shared, pickle.dumps(fresh) if fresh else b"", made, copied), first


def argument_named(item: pytest.Function, name: str) -> str:
    """"parameter `typ` of parametrize" or "fixture `typ`"."""
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {}).get(name)
    direct = not defs or getattr(defs[-1].func, "__name__", "") == "get_direct_param_fixture_func"
    callspec = getattr(item, "callspec", None)
    if direct and callspec is not None and name in callspec.params:
        return f"parameter `{name}` of parametrize"
    return f"fixture `{name}`"


def _fix(item: pytest.Function, name: str) -> str:
    if argument_named(item, name).startswith("parameter"):
        return (f"parametrize with plain data (a name, a number) and build the object in "
                f"the test: @pytest.mark.parametrize(\"{name}\", [\"a\", \"b\"])")
    return ("a harness test takes fixtures of plain data (numbers, strings, paths, "
            "picklable objects); build the object inside the test, or make the fixture "
            "return what builds it")


def _copies(value: object) -> bool:
    """Whether each call can have its own deep copy of a value that cannot be pickled."""
    try:
        return copy.deepcopy(value) is not value
    except Exception:   # copying raises what the object's reducer raises
        return False


def _function_scoped(item: pytest.Function, name: str) -> bool:
    """Whether pytest sets the argument up per test (wider scopes are shared)."""
    info = getattr(item, "_fixtureinfo", None)
    defs = getattr(info, "name2fixturedefs", {}).get(name) or ()
    return not defs or getattr(defs[-1], "scope", "function") == "function"


def _unused(item: pytest.Function, name: str, value: object) -> list[str]:
    """Why a test whose fixtures used `monkeypatch` runs as a fork: the patches exist only here."""
    attrs = len(getattr(value, "_setattr", None) or ())
    items = sum(1 for d, _, _ in getattr(value, "_setitem", None) or () if d is not os.environ)
    if not isinstance(value, pytest.MonkeyPatch) or not (attrs or items):
        return []
    what = ", ".join(f"{n} {w}{'s' if n > 1 else ''}" for n, w in (
        (attrs, "attribute"), (items, "item")) if n)
    return [f"fixture `{name}` was used before the test (it set {what} in pytest's "
            "process)"]


def _saved(item: pytest.Function) -> tuple[Saved | None, Saved | None, str]:
    """(where to save this test's run, the saved run to compare with, a note)."""
    config = item.config
    base = config.rootpath / SAVED_DIR
    key = key_of(item.nodeid)
    save_as, compare_with = (config.getoption("harness_save"),
                             config.getoption("harness_compare"))
    save = Saved(base / save_as, key, f"{save_as} (saved)") if save_as else None
    compare = (Saved(base / compare_with, key, f"{compare_with} (saved)")
               if compare_with else None)
    note = ""
    if compare is not None and not compare.exists():
        note = (f"not compared: no run of this test saved as {compare_with!r} "
                f"(--harness-save {compare_with} first)")
        compare = None
    if save is not None:
        note = "; ".join(n for n in (note, f"saved as {save_as!r}") if n)
    return save, compare, note
