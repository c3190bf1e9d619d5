"""What the pytest plugin and a marked test's run (`harness.api.marked`) share, importing
nothing of harness so the plugin stays light. harness calls a test thousands of times, so
`Calls` keeps fixtures from building up state or passing output on: values shared, copied
(to `FRESH_MOST` bytes), or made in the child (`Made`) and reset after every call as pytest's
teardown would; wider-scoped fixtures are shared, as pytest does.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import os
import pickle
import sys
import threading
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Protocol

import pytest
from _pytest import capture as _capture
from _pytest.logging import (
    LogCaptureHandler,
    caplog_handler_key,
    caplog_records_key,
    catching_logs,
)

MONKEYPATCH, CAPLOG, CAPTURE, RECWARN = "monkeypatch", "caplog", "capture", "recwarn"
# A function-scoped value pickled larger than this is shared, not copied per call:
# unpickling it would dominate the measured step.
FRESH_MOST = 1 << 20
_ATOMS = (type(None), bool, int, float, complex, str, bytes, range, PurePath)


@dataclass(frozen=True)
class Made:
    """A pytest fixture the child makes itself: its kind and the options to make it with."""

    kind: str
    capture: str = ""
    options: tuple[tuple[str, object], ...] = ()
    level: int | None = None
    fmt: str = "%(levelname)-8s %(name)s:%(filename)s:%(lineno)d %(message)s"
    datefmt: str | None = None


def made_for(value: object, config: pytest.Config) -> Made | None:
    """The `Made` for a fixture value the child makes itself, else None (sent as is)."""
    if isinstance(value, pytest.MonkeyPatch):
        return Made(MONKEYPATCH)
    if type(value) is pytest.WarningsRecorder:
        return Made(RECWARN)
    if isinstance(value, pytest.CaptureFixture):
        options = getattr(value, "_config", None) or {}
        return Made(CAPTURE, value.captureclass.__name__, tuple(sorted(options.items())))
    if isinstance(value, pytest.LogCaptureFixture):
        plugin = config.pluginmanager.get_plugin("logging-plugin")
        level = getattr(plugin, "log_level", None)
        fmt = config.getoption("log_format", None) or config.getini("log_format")
        datefmt = config.getoption("log_date_format", None) or config.getini(
            "log_date_format")
        return Made(CAPLOG, level=level if isinstance(level, int) else None,
                    fmt=str(fmt) if fmt else Made.fmt, datefmt=str(datefmt) if datefmt
                    else None)
    return None


def changeable(value: object) -> bool:
    """Whether a call could change the value in place (not an immutable scalar or tuple)."""
    if isinstance(value, (tuple, frozenset)):
        return any(changeable(v) for v in value)
    return not isinstance(value, _ATOMS)


class _Live(Protocol):
    @property
    def value(self) -> object: ...

    def reset(self) -> None: ...

    def close(self) -> None: ...


class _MonkeyPatch:
    def __init__(self) -> None:
        self.value = pytest.MonkeyPatch()

    def reset(self) -> None:
        self.value.undo()

    close = reset


class _Stashed:
    """What `LogCaptureFixture` reads of a test item: its stash."""

    def __init__(self) -> None:
        self.stash = pytest.Stash()


class _Caplog:
    def __init__(self, made: Made) -> None:
        self.handler = LogCaptureHandler()
        self.handler.setFormatter(logging.Formatter(made.fmt, made.datefmt))
        self.catching = catching_logs(self.handler, level=made.level)
        self.catching.__enter__()
        self.item = _Stashed()
        self.item.stash[caplog_handler_key] = self.handler
        self.value = self._fresh()

    def _fresh(self) -> pytest.LogCaptureFixture:
        self.item.stash[caplog_records_key] = {"call": self.handler.records}
        return pytest.LogCaptureFixture(self.item, _ispytest=True)  # type: ignore[arg-type]

    def reset(self) -> None:
        self.value._finalize()
        self.handler.reset()
        self.value = self._fresh()

    def close(self) -> None:
        self.value._finalize()
        self.catching.__exit__(None, None, None)


class _Capture:
    def __init__(self, made: Made) -> None:
        kind = getattr(_capture, made.capture)
        # No request: the child has no capture manager for `capsys.disabled()`.
        self.value: pytest.CaptureFixture[str] = pytest.CaptureFixture(
            kind, None, config=dict(made.options), _ispytest=True)  # type: ignore[arg-type]
        self.value._start()
        # Check the files' sizes first: reading and emptying them costs far more.
        multi = self.value._capture
        self.files = [getattr(c, "tmpfile", None) for c in (multi.out, multi.err)] \
            if multi is not None and made.capture.startswith("FD") else []

    def reset(self) -> None:
        if self.files and not any(f is None or os.fstat(f.fileno()).st_size
                                  for f in self.files):
            return
        self.value.readouterr()

    def close(self) -> None:
        self.value.close()


class _Recwarn:
    def __init__(self) -> None:
        self.value = self._fresh()

    @staticmethod
    def _fresh() -> pytest.WarningsRecorder:
        recorder = pytest.WarningsRecorder(_ispytest=True)
        recorder.__enter__()
        warnings.simplefilter("default")    # as pytest's recwarn
        return recorder

    def reset(self) -> None:
        self.value.__exit__(None, None, None)
        self.value = self._fresh()

    def close(self) -> None:
        self.value.__exit__(None, None, None)


# A fresh interpreter's warning filters (Python 3.7+, not in development mode).
_FRESH_FILTERS = (("default", DeprecationWarning, "__main__"),
                  ("ignore", DeprecationWarning, ""), ("ignore", PendingDeprecationWarning, ""),
                  ("ignore", ImportWarning, ""), ("ignore", ResourceWarning, ""))


def as_a_fresh_child() -> None:
    """In a fork of pytest's process, undo what pytest set up around the test that a fresh
    child lacks (log handlers and warning records, which read as leaks; exception hooks).
    Nothing to do in a fresh child; never in pytest's own process."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, LogCaptureHandler)]:
        root.removeHandler(handler)
    # pytest's hooks that keep what a call's unraisable exception or thread's end said
    sys.unraisablehook = sys.__unraisablehook__
    threading.excepthook = threading.__excepthook__
    if isinstance(getattr(getattr(warnings, "_showwarnmsg_impl", None), "__self__", None),
                  list):
        warnings._showwarnmsg_impl = _to_stderr  # type: ignore[attr-defined]
        warnings.resetwarnings()
        for action, category, module in _FRESH_FILTERS:
            warnings.filterwarnings(action, category=category, module=module,  # type: ignore[arg-type]
                                    append=True)


def _to_stderr(shown: warnings.WarningMessage) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(warnings.formatwarning(shown.message, shown.category,
                                                shown.filename, shown.lineno, shown.line))


def _live(made: Made) -> _Live:
    if made.kind == MONKEYPATCH:
        return _MonkeyPatch()
    if made.kind == CAPLOG:
        return _Caplog(made)
    if made.kind == CAPTURE:
        return _Capture(made)
    return _Recwarn()


@dataclass
class Calls:
    """A marked test's keyword arguments for every call: `shared`, `fresh` (unpickled per
    call), `copied` (deep-copied per call, in a fork), and fixtures the child makes
    (`made`), reset after each call. In the child, `kwargs` is what the next call takes."""

    shared: dict[str, object]
    fresh: bytes
    made: dict[str, Made]
    copied: dict[str, object] = field(default_factory=dict)
    forked: bool = False        # the calls run in a fork of pytest's process
    kwargs: dict[str, object] = field(default_factory=dict, init=False, repr=False)
    _live: dict[str, _Live] = field(default_factory=dict, init=False, repr=False)

    @property
    def names(self) -> tuple[str, ...]:
        """Every argument's name, the fresh ones' included (host side)."""
        fresh = pickle.loads(self.fresh) if self.fresh else {}
        return (*self.shared, *fresh, *self.copied, *self.made)

    def start(self) -> Calls:
        """The fixtures made (in the child's setup), the first call's arguments set."""
        if self.forked:
            as_a_fresh_child()
        self._live = {name: _live(made) for name, made in self.made.items()}
        self._next_kwargs()
        return self

    def next(self) -> None:
        """After a call: reset each fixture made (last first); set the next call's arguments."""
        for live in reversed(self._live.values()):
            live.reset()
        self._next_kwargs()

    def close(self) -> None:
        """At the child's teardown: each fixture made torn down (the last made first)."""
        for live in reversed(self._live.values()):
            live.close()
        self._live = {}

    def _next_kwargs(self) -> None:
        fresh: Mapping[str, object] = pickle.loads(self.fresh) if self.fresh else {}
        copied = copy.deepcopy(self.copied) if self.copied else {}
        self.kwargs = {**self.shared, **fresh, **copied,
                       **{name: live.value for name, live in self._live.items()}}

    def __getstate__(self) -> dict[str, object]:
        return {"shared": self.shared, "fresh": self.fresh, "made": self.made,
                "copied": self.copied}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state, kwargs={}, _live={})


# The plugin's names, which the plugin and a marked test's run share.
LEAKS, TIME = "harness_leaks", "harness_time"
PROPERTY = "harness"        # the user_properties key (junit-xml), the report section
SAVED_DIR = ".harness"      # saved runs (--harness-save), under the rootdir
RAN_ON = "harness_ran_on"   # user_properties: "decided|undecided SECONDS" of a test run on
TOOK = "harness_took"       # user_properties: "WALL OWN" seconds of its calls (a busy host)
OVERRUN, ALLOWANCE = 16, "5m"   # --harness-overrun, --harness-allowance: their defaults


@dataclass
class RunOn:
    """How far the session's undecided tests may run on, and what they have spent."""

    overrun: int            # budgets a test takes in all, its runs again included
    allowance: float        # seconds past their first runs, the session's tests together
    spent: float = 0.0

    def overrun_for(self, budget: float) -> int | None:
        """The `overrun` for a test of `budget` s within the allowance; None if used up."""
        left = self.allowance - self.spent
        most = min(self.overrun, int(1.0 + left / budget)) if budget > 0 else self.overrun
        return most if most > 4 else None


RUNNING_ON = pytest.StashKey[RunOn]()


def duration_seconds(text: str) -> float | None:
    """"5m", "90s", "500ms", "1h" or a number of seconds; None where it is none."""
    units = (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0))
    for unit, scale in units:
        if text.endswith(unit) and not (unit == "s" and text.endswith("ms")):
            text, factor = text[: -len(unit)], scale
            break
    else:
        factor = 1.0
    try:
        value = float(text) * factor
    except ValueError:
        return None
    return value if value >= 0 and math.isfinite(value) else None
