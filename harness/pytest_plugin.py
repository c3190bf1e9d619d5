"""pytest plugin (entry point `harness`): a test function run as a harness cell.

    @pytest.mark.harness_leaks(budget="2s")
    def test_parse_does_not_leak(sample_bytes):
        parse(sample_bytes)

The test is the step, run over and over in a child (`harness.api.check`): a bad verdict fails
it, as `regression` against `--harness-compare NAME`'s saved run (`--harness-save`) does; an
undecided one passes with a warning (`--harness-strict`: fails). `harness_time` likewise.
"""

from __future__ import annotations

import unicodedata

import pytest

from harness.pytestcall import (
    ALLOWANCE,
    LEAKS,
    OVERRUN,
    PROPERTY,
    RAN_ON,
    RUNNING_ON,
    SAVED_DIR,
    TIME,
    TOOK,
    RunOn,
    duration_seconds,
)


def _is_name(name: str) -> bool:
    """A folder name under .harness/: a letter or digit, then those, '.', '_' and '-'."""
    return bool(name) and name[0].isalnum() and all(
        c.isalnum() or c in "._-" or unicodedata.category(c)[0] == "M" for c in name)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness", "harness: a test function run as a cell")
    group.addoption("--harness-save", metavar="NAME", default=None,
                    help="keep each harness_time test's run as NAME, under .harness/NAME/ "
                         "in the rootdir")
    group.addoption("--harness-compare", metavar="NAME", default=None,
                    help="compare each harness_time test's step times and peak memory with "
                         "its run saved as NAME (--harness-save NAME): a confirmed slowdown "
                         "fails the test")
    group.addoption("--harness-strict", action="store_true", default=False,
                    help="fail a harness test whose verdict is undecided (its budget too "
                         "short for one) instead of passing it with a warning")
    group.addoption("--harness-overrun", metavar="N", default=None,
                    help="a harness test whose run ends undecided runs on, longer, until "
                         f"decided, within N times its budget in all (default {OVERRUN}; "
                         "ini harness_overrun; a marker's overrun= sets one test's)")
    group.addoption("--harness-allowance", metavar="DURATION", default=None,
                    help="the seconds past their first runs that the session's undecided "
                         f"tests may run on in all (default {ALLOWANCE}; ini "
                         "harness_allowance); once spent, a test runs within 4 budgets")
    parser.addini("harness_overrun", f"as --harness-overrun (default {OVERRUN})",
                  default=str(OVERRUN))
    parser.addini("harness_allowance", f"as --harness-allowance (default {ALLOWANCE})",
                  default=ALLOWANCE)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{LEAKS}(budget='2s', **settings): run the test function over and over "
        "in a child process (harness); fail on a leak or any other bad verdict")
    config.addinivalue_line(
        "markers", f"{TIME}(budget='2s', **settings): as {LEAKS}; with --harness-save NAME "
        "keep the run, with --harness-compare NAME compare step times with the saved run")
    for option in ("harness_save", "harness_compare"):
        name = config.getoption(option)
        if name is not None and not _is_name(name):
            flag = "--" + option.replace("_", "-")
            raise pytest.UsageError(f"{flag} {name!r}: a name of letters (any script), "
                                    f"digits, '.', '_' and '-' (it names a folder under "
                                    f"{SAVED_DIR}/), e.g. {flag} main")
    _known_compare(config)
    config.stash[RUNNING_ON] = _running_on(config)
    config.pluginmanager.register(_Summary(config.stash[RUNNING_ON]), "harness-summary")


def _running_on(config: pytest.Config) -> RunOn:
    """The session's `RunOn`, from the options (else the ini keys), checked."""
    overrun = config.getoption("harness_overrun") or config.getini("harness_overrun")
    allowance = config.getoption("harness_allowance") or config.getini("harness_allowance")
    try:
        times = int(str(overrun))
    except ValueError:
        times = 0
    if times < 2:
        raise pytest.UsageError(f"--harness-overrun {overrun!r}: the budgets a test may "
                                "take in all, its runs again included: a whole number, 2 or "
                                "more, e.g. --harness-overrun 16")
    seconds = duration_seconds(str(allowance))
    if seconds is None:
        raise pytest.UsageError(f"--harness-allowance {allowance!r}: a duration, e.g. "
                                "--harness-allowance 5m, 90s or 0 (no test runs on past 4 "
                                "budgets)")
    return RunOn(times, seconds)


def _known_compare(config: pytest.Config) -> None:
    """Refuse `--harness-compare NAME` for a NAME never saved (a typo would pass
    every test), naming the saved ones."""
    name = config.getoption("harness_compare")
    if name is None or name == config.getoption("harness_save"):
        return
    base = config.rootpath / SAVED_DIR
    if (base / name / "cells").is_dir():
        return
    try:
        saved = sorted(p.name for p in base.iterdir() if (p / "cells").is_dir())
    except OSError:
        saved = []
    where = f"{SAVED_DIR}/ in {config.rootpath}"
    if saved:
        raise pytest.UsageError(
            f"--harness-compare {name!r}: no run was saved under that name ({where} "
            f"holds: {', '.join(saved)})\n  fix: --harness-compare {saved[0]}, or save "
            f"one first: --harness-save {name}")
    raise pytest.UsageError(
        f"--harness-compare {name!r}: no run was ever saved ({where} holds none)\n  "
        f"fix: run the tests with --harness-save {name} first, then --harness-compare "
        f"{name}")


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """After collection, start what marked tests fork from (`marked.ahead`)."""
    if session.config.option.collectonly or not any(
            item.get_closest_marker(LEAKS) or item.get_closest_marker(TIME)
            for item in session.items):
        return
    # lazy: the plugin loads in every pytest session; harness only once a marked test runs
    from harness.api import marked

    marked.ahead(session.items)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    timed = pyfuncitem.get_closest_marker(TIME)
    leaks = pyfuncitem.get_closest_marker(LEAKS)
    if timed is None and leaks is None:
        return None
    # lazy: the plugin loads in every pytest session; harness only once a marked test runs
    from harness.api import marked

    marked.run(pyfuncitem, [m for m in (leaks, timed) if m is not None], timed is not None)
    return True


class _Summary:
    """Each harness test's line (here and from xdist workers) and the session's lines."""

    def __init__(self, run_on: RunOn) -> None:
        self.run_on = run_on
        self.lines: list[tuple[str, str, str]] = []
        self.ran_on: list[tuple[bool, float]] = []
        self.took = [0.0, 0.0]
        self.short = 0      # tests that ran within 4 budgets, the allowance spent

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        for key, value in report.user_properties:
            if key == PROPERTY:
                self.lines.append((report.nodeid, report.outcome, str(value)))
            elif key == RAN_ON:
                how, seconds = str(value).split()
                if how == "short":
                    self.short += 1
                else:
                    self.ran_on.append((how == "decided", float(seconds)))
            elif key == TOOK:
                wall, own = (float(x) for x in str(value).split())
                self.took = [self.took[0] + wall, self.took[1] + own]

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.lines:
            return
        terminalreporter.section("harness")
        for nodeid, outcome, text in self.lines:
            terminalreporter.write_line(f"{outcome.upper()} {nodeid}: {text}")
        for line in summary_lines(self.ran_on, self.took, self.run_on, self.short):
            terminalreporter.write_line(line)


def summary_lines(ran_on: list[tuple[bool, float]], took: list[float], run_on: RunOn,
                  short: int = 0) -> list[str]:
    """The session's lines: tests run on past an undecided first run, and host load."""
    out = []
    if ran_on:
        decided = sum(1 for d, _ in ran_on if d)
        seconds = sum(s for _, s in ran_on)
        out.append(
            f"harness: {len(ran_on)} test(s) ran on past an undecided first run, "
            f"{decided} decided, {len(ran_on) - decided} still undecided: {seconds:.1f} s "
            f"past their first runs (each within {run_on.overrun:g}x its budget, "
            f"--harness-overrun; {_said(run_on.allowance)} a session, --harness-allowance)")
    if short:
        out.append(f"harness: the allowance was spent: {short} later test(s) ran "
                   "within 4 budgets (--harness-allowance raises it)")
    wall, own = took
    if own > 0 and wall > 1.5 * own and wall - own > 1.0:
        out.append(f"harness: host busy: the marked tests' calls took {wall:.1f} s of wall "
                   f"clock for {own:.1f} s of their own time ({wall / own:.1f}x); budgets "
                   "count their own time, so the session took longer")
    return out


def _said(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 and seconds % 60 == 0 else f"{seconds:g} s"
