"""The scenario file `harness.check` writes: its setup(params) and step(state) call the
user's functions, imported by name (or file) in the child; with here=True, as this
process holds them, in a fork of it (`scenario_here`)."""

from __future__ import annotations

import inspect
import itertools
import os
import pickle
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from harness.errors import InputError

SCENARIO = "_harness_check.py"      # never a name a user's module has
KWARGS = "kwargs.pkl"


class PerCall(Protocol):
    """Keyword arguments made again for every call (`harness.pytestcall.Calls`)."""

    @property
    def names(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class _Target:
    """A function the child imports: by module name from `root`, else by its file."""

    module: str
    qualname: str
    file: str | None
    root: str | None


def _target(fn: object, role: str) -> _Target:
    """Where the child finds `fn`.

    Raises:
        InputError: `fn` is not a module-level function the child can import.
    """
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    module = getattr(fn, "__module__", None)
    shown = f"{module}.{name}" if module and name else repr(fn)
    fix = (f"define `{role}` with `def` at the top level of a module file (e.g. "
           f"mymodule.py) and pass it: harness.check(mymodule.{role})")
    # a fork of this process needs no import by name (`scenario_here`)
    forked = "\n  or: harness.check(..., here=True), which runs it in a fork of this process"
    if not callable(fn) or not isinstance(name, str) or not isinstance(module, str):
        raise InputError(f"harness.check: {role}={fn!r} is not a function\n  fix: {fix}")
    if name == "<lambda>" or "<lambda>" in name:
        raise InputError(f"harness.check: {role} {shown} is a lambda, which the child process "
                         f"cannot import by name\n  fix: {fix}{forked}")
    if "<locals>" in name:
        raise InputError(f"harness.check: {role} {shown} is defined inside another function "
                         f"(a closure), which the child process cannot import by name\n"
                         f"  fix: {fix}{forked}")
    _not_async(fn, role, shown)
    mod = sys.modules.get(module)
    if module == "__main__" or mod is None:
        where = ("the script run as __main__" if module == "__main__"
                 else f"module {module}, which is not imported")
        raise InputError(
            f"harness.check: {role} {shown} is defined in {where}, which the child process "
            "cannot import by name\n  fix: move it into a module file beside the script "
            f"(e.g. steps.py) and import it from there{forked}")
    found: object = mod
    for part in name.split("."):
        found = getattr(found, part, None)
    if _unwrapped(found) is not _unwrapped(fn):
        raise InputError(f"harness.check: {role} {shown} is not found under that name in its "
                         f"module (made at run time, or renamed)\n  fix: {fix}")
    file = getattr(mod, "__file__", None)
    if file is None:    # built in, or a namespace: importable by name alone
        return _Target(module, name, None, None)
    file = os.path.realpath(file)
    return _Target(module, name, file, _import_root(module, file))


def _not_async(fn: object, role: str, shown: str) -> None:
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        raise InputError(f"harness.check: {role} {shown} is `async def`: the agent calls it "
                         f"and never awaits it\n  fix: a plain `def` that runs the coroutine "
                         "(asyncio.run(...))")


def unreachable(fn: object) -> str | None:
    """Why the child cannot import `fn` by name (lambda, closure, method, __main__), or None."""
    try:
        _target(fn, "step")
    except InputError as exc:
        return str(exc).split("\n")[0].removeprefix("harness.check: ")
    return None


def _unwrapped(fn: object) -> object:
    return inspect.unwrap(fn) if callable(fn) else fn


def _import_root(module: str, file: str) -> str | None:
    """The directory from which `module` imports as `file`, or None."""
    path = Path(file)
    path = path.parent if path.stem == "__init__" else path.with_suffix("")
    for part in reversed(module.split(".")):
        if path.name != part:
            return None
        path = path.parent
    return str(path)


def _named(fn: Callable[..., object]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def _arity(fn: Callable[..., object], counts: tuple[int, ...]) -> int | None:
    """The first number of positional arguments in `counts` that `fn` takes."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):     # a builtin without a signature: try the first
        return counts[0]
    for n in counts:
        try:
            sig.bind(*([None] * n))
            return n
        except TypeError:
            continue
    return None


def _calls(step: Callable[..., object], setup: Callable[..., object] | None,
           kwargs: Mapping[str, object] | PerCall | None, here: bool = False
           ) -> tuple[str, str]:
    """The bodies of the scenario's setup(params) and step(state); `here`: the arguments
    as this process has them, not unpickled.

    Raises:
        InputError: a function that cannot be called the way it would be.
    """
    if kwargs is not None:
        if setup is not None:
            raise InputError("harness.check: give `setup` or `kwargs`, not both\n  fix: with "
                             "kwargs, step is called as step(**kwargs) after they are loaded")
        names = kwargs if isinstance(kwargs, Mapping) else dict.fromkeys(kwargs.names)
        try:
            inspect.signature(step).bind(**names)
        except TypeError as exc:
            raise InputError(f"harness.check: step {_named(step)} cannot be called with "
                             f"{sorted(names)}: {exc}\n  fix: pass the keyword arguments "
                             "step takes") from None
        except ValueError:
            pass
        load = ("    return _kwargs" if here else
                f"    with open(os.path.join(_HERE, {KWARGS!r}), 'rb') as f:\n"
                "        return pickle.load(f)")
        if isinstance(kwargs, Mapping):
            return load, "    _step(**state)"
        # Each call's own arguments: what the call before built up is reset after it.
        return (f"{load}.start()", "    try:\n        _step(**state.kwargs)\n    finally:\n"
                "        state.next()")
    if setup is None:
        if _arity(step, (0,)) is None:
            raise InputError(
                f"harness.check: step {_named(step)} takes arguments, and no setup "
                "gives it any\n  fix: give setup=make_state (called once, outside the "
                "measured calls), and step is then called as step(state)")
        return "    return None", "    _step()"
    takes = _arity(setup, (1, 0))
    if takes is None:
        raise InputError(f"harness.check: setup {_named(setup)} must take params or "
                         "nothing\n  fix: def setup(params): ... return state")
    if _arity(step, (1,)) is None:
        raise InputError(f"harness.check: step {_named(step)} is called as step(state) "
                         f"with what setup returns\n  fix: def {step.__name__}(state): ...")
    return ("    return _setup(params)" if takes else "    return _setup()"), "    _step(state)"


# Both scenario files end alike: setup, step, and teardown for per-call arguments.
_CALLS = '''
import warnings as _warnings

# The warnings the calls show (the first 20), for the pytest plugin to raise again in
# pytest's process: a suite's own warnings reach its summary (`info`).
_SHOWN = []


def _shown(message, category, filename, lineno, file=None, line=None,
           _was=_warnings.showwarning):
    if len(_SHOWN) < 20:
        _SHOWN.append([category.__module__, category.__qualname__, str(message),
                       filename, lineno])
    _was(message, category, filename, lineno, file, line)


def setup(params):
    _warnings.showwarning = _shown
{setup_body}


def step(state):
{step_body}


def info(state):
    return {{"warnings": _SHOWN}}
{teardown}'''
_TEARDOWN = "\n\ndef teardown(state):\n    state.close()\n"

_TEMPLATE = '''"""Written by harness.check: {what}."""
import importlib
import importlib.util
import os
import pickle
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
# Where the user's functions are found, first; then the rest of the parent's import
# path after the child's own, so a package the child's environment has is its own,
# never one of another environment the parent's path named.
sys.path[1:1] = [p for p in {first!r} if p not in sys.path]
sys.path.extend(p for p in {paths!r} if p not in sys.path)


def _load(module, qualname, file):
    try:
        mod = importlib.import_module(module)
    except ImportError:
        if file is None:
            raise
        mod = None
    where = getattr(mod, "__file__", None)
    if file is not None and (where is None or os.path.realpath(where) != file):
        spec = importlib.util.spec_from_file_location(module, file)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[module] = mod
        spec.loader.exec_module(mod)
    found = mod
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


_step = _load{step!r}
_setup = {setup}{per_call}''' + _CALLS


def _paths(*first: str | None, parent: bool = True) -> list[str]:
    """Import path entries for the child: `first`, then (`parent`) this process's."""
    out: list[str] = []
    for p in [*first, *(sys.path if parent else ())]:
        if p is None:
            continue
        p = os.path.abspath(p or os.curdir)
        if p not in out and os.path.isdir(p):
            out.append(p)
    return out


def scenario_text(step: Callable[..., object], setup: Callable[..., object] | None,
                  kwargs: Mapping[str, object] | PerCall | None) -> str:
    """The scenario file's text: setup(params), step(state) and, if needed, teardown."""
    s = _target(step, "step")
    u = _target(setup, "setup") if setup is not None else None
    setup_body, step_body = _calls(step, setup, kwargs)
    what = f"step(state) calls {s.module}.{s.qualname}" + (
        f", setup(params) calls {u.module}.{u.qualname}" if u else "")
    return _TEMPLATE.format(
        what=what, first=_paths(s.root, u.root if u else None, parent=False),
        paths=_paths(),
        step=(s.module, s.qualname, s.file),
        setup=f"_load{(u.module, u.qualname, u.file)!r}" if u else "None",
        per_call="" if kwargs is None or isinstance(kwargs, Mapping) else _per_call(kwargs),
        setup_body=setup_body, step_body=step_body,
        teardown="" if kwargs is None or isinstance(kwargs, Mapping) else _TEARDOWN)


# What `harness.check(here=True)` runs, by key, read in a fork of this process: never pickled.
HERE: dict[str, tuple[Callable[..., object], Callable[..., object] | None, object]] = {}
_KEYS = itertools.count()

_HERE_TEMPLATE = '''"""Written by harness.check: {what}, as they are in the process this run is
forked from (here=True): nothing is imported by name or unpickled."""
import sys

try:
    _step, _setup, _kwargs = sys.modules["harness.api.scenario"].HERE[{key!r}]
except (KeyError, AttributeError):
    raise RuntimeError("this scenario runs only in a fork of the process that wrote it "
                       "(harness.check(..., here=True))") from None''' + _CALLS


def scenario_here(step: Callable[..., object], setup: Callable[..., object] | None,
                  kwargs: Mapping[str, object] | PerCall | None) -> tuple[str, str]:
    """The scenario text for a run forked from this process, and the key under which
    `HERE` holds step, setup and kwargs for it (the caller drops it after).

    Raises:
        InputError: a function that is not one, or cannot be called the way it would be.
    """
    for fn, role in ((step, "step"), (setup, "setup")):
        if fn is not None and not callable(fn):
            raise InputError(f"harness.check: {role}={fn!r} is not a function\n  fix: pass "
                             "a function (here=True: a lambda or a closure will do)")
        if fn is not None:
            _not_async(fn, role, _named(fn))
    setup_body, step_body = _calls(step, setup, kwargs, here=True)
    key = f"{os.getpid()}-{next(_KEYS)}"
    HERE[key] = (step, setup, kwargs)
    what = f"step(state) calls {_named(step)}" + (
        f", setup(params) calls {_named(setup)}" if setup else "")
    per_call = kwargs is not None and not isinstance(kwargs, Mapping)
    return _HERE_TEMPLATE.format(
        what=what, key=key, setup_body=setup_body, step_body=step_body,
        teardown=_TEARDOWN if per_call else ""), key


def _per_call(kwargs: PerCall) -> str:
    """The line importing the per-call class from this harness's file, not another install."""
    c = _target(type(kwargs), "kwargs")
    return ("\n# the class of the arguments made for every call\n"
            f"_load{(c.module, c.qualname, c.file)!r}")


def pickled(kwargs: Mapping[str, object] | PerCall) -> bytes:
    """Raises: InputError: a value that cannot be sent to the child, named."""
    if not isinstance(kwargs, Mapping):
        return pickle.dumps(kwargs)     # its maker checked its values
    for name, value in kwargs.items():
        try:
            pickle.dumps(value)
        except Exception as exc:   # pickling raises what the object's reducer raises
            raise InputError(
                f"harness.check: kwargs[{name!r}] ({type(value).__name__}) cannot be sent to "
                f"the child process that runs the step: {type(exc).__name__}: {exc}\n  fix: "
                "pass plain data (numbers, strings, paths, lists, dicts, picklable objects), "
                "and build the rest inside the step's module") from None
    return pickle.dumps(dict(kwargs))
