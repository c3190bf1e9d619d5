"""pytest plugin (entry point `harness`): a test function run as a harness cell.

    @pytest.mark.harness_leaks(budget="2s")
    def test_parse_does_not_leak(sample_bytes):
        parse(sample_bytes)

The test function is the step: the plugin runs it over and over in a child process
(`harness.api.check`, the machinery of a `runtime: local` sweep), its fixture values
set up once by pytest here and sent to the child (pickled; a test whose arguments cannot
be pickled, or that is a method of a class, runs as a fork of this process instead, its
arguments live), and the test fails on a bad verdict with its words,
rule and figures ("harness: leak (rule leak): heap grows +1.1 KiB/call ..."). A pass
says the smallest leak the run could have missed (`-rA` shows it as the test's
"harness" section; the terminal summary lists every harness test; junit-xml gets it as
a property).

`@pytest.mark.harness_time(budget="2s")` runs the test the same way and, with
`--harness-save NAME`, keeps the run under `<rootdir>/.harness/NAME/`; with
`--harness-compare NAME` it runs again and compares step times and peak memory with the
run saved as NAME: the sweep's pooled comparison, then rounds that must confirm a
suspected change (`harness.api.saved`: the saved code cannot run again, so each round
is a fresh run of the current code against the saved run, not the sweep's interleaved
B S B S rounds). A confirmed slowdown fails the test (`regression`); an unconfirmed one
passes as `suspected`. A test with no saved run passes, said so in the summary; a NAME
nothing was ever saved as (a typo) is a usage error naming the saved ones.

Marker arguments: `budget` (or the first positional argument), `iterations`, and any run
setting of a matrix's `defaults:` (`heap="stock"`, `warmup=50`, `timeout="2m"`). A test
takes at most `overrun` budgets (4 unless set), its runs again included: a budget too
short for a verdict passes it with a warning that names the budget that would decide
(`--harness-strict`: fails it), since nothing was found against the code.
The children are forked from one warm interpreter per pytest
process, which imported the test module once (harness/agent/forkserver.py): a test costs
its budget, not an interpreter's start and its imports. Under pytest-xdist each worker
has its own; the saved runs are files written atomically, one directory per test.

Nothing of harness but its names (`harness.pytestnames`, four constants) is imported
until marked tests are to run: unmarked sessions pay for two marker lines and three
options. Where some are, the warm interpreter is started, the first one's module
imported in it, once they are collected, before the first test's clock
(`harness.api.marked.ahead`).
"""

from __future__ import annotations

import unicodedata

import pytest

from harness.pytestnames import LEAKS, PROPERTY, SAVED_DIR, TIME


def _is_name(name: str) -> bool:
    """A folder name under .harness/: letters of any script and digits first, then
    those, '.', '_' and '-' (no '/', no '..')."""
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
    config.pluginmanager.register(_Summary(), "harness-summary")


def _known_compare(config: pytest.Config) -> None:
    """Refuse `--harness-compare NAME` where nothing was ever saved as NAME (a typo
    would otherwise pass every test as "not compared"), naming the saved ones. A name
    saved before, or saved in this same session, is known; a test with no run under a
    known name still passes, said."""
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
    """Once the tests are collected, before the first one's clock: where some are marked,
    what they fork from started (`harness.api.marked.ahead`). Under xdist, in each
    worker (the controller collects nothing)."""
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
    """Each harness test's line, from this process's reports and from xdist's workers'
    (their reports carry user_properties), listed in the terminal summary."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, str]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            self.lines += [(report.nodeid, report.outcome, str(value))
                           for key, value in report.user_properties if key == PROPERTY]

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.lines:
            terminalreporter.section("harness")
            for nodeid, outcome, text in self.lines:
                terminalreporter.write_line(f"{outcome.upper()} {nodeid}: {text}")
