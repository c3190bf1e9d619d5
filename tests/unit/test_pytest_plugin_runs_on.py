"""Issue 86 items 1, 2 and 5: a marked test whose run ends undecided runs on, longer,
until decided, within a multiple of its budget (`--harness-overrun`) and a session's
allowance (`--harness-allowance`), both said; what that took is said once in the
session's summary, apart from the budgets, and so is a busy host.

The four cases are the classes the issue names, at `budget="0.5s"`, each call ~0.5 ms
of work (~1,000 calls in the budget: at 1.5 ms a call, a loaded CI's pace left the run
that decides past 16 budgets, and the leaks passed undecided). Their truth is by
construction (and, by a plain loop of 20,000 calls under tracemalloc, 2,515 B/call and
432 B/call for the first two without end, the LRU flat at 2.1 MiB from call 1,024 on,
the clean test flat):

- a per-type handler cache fed a new class each call (grows forever);
- a module-level exception re-raised each call (its traceback chain grows forever);
- an LRU cache of 1,024 entries of ~2 KB (fills over its first 1,024 calls, then holds);
- a clean test.

Before, at 0.5 s (~300 calls of 1.5 ms) the LRU failed as a leak in every run ("a cache would
hold more than 568 KiB") while the two real leaks passed undecided in some runs (rule
`filling`, "it runs no more"): the outcome came from a guess at a cache's size. Run by
pytest in a child process (`pytester`), as tests/unit/test_pytest_plugin.py runs the
plugin."""

from __future__ import annotations

import re

import pytest
from pluginkit import run_plugin

from harness.pytest_plugin import summary_lines
from harness.pytestcall import RunOn

pytest_plugins = ["pytester"]

CLASSES = '''
import functools

import pytest


def _work():
    return sum(range(30000))


_HANDLERS = {}


def handler_for(cls):
    h = _HANDLERS.get(cls)
    if h is None:
        h = _HANDLERS[cls] = (lambda v, c=cls: c.__name__ + repr(v))
    return h


@pytest.mark.harness_leaks(budget="0.5s")
def test_per_type_cache():
    cls = type("Point", (), {"x": 1})
    handler_for(cls)(cls())
    _work()


_ERR = ValueError("bad value")


def _parse(text):
    raise _ERR


@pytest.mark.harness_leaks(budget="0.5s")
def test_reraised_module_exception():
    try:
        _parse("x")
    except ValueError:
        pass
    _work()


@functools.lru_cache(maxsize=1024)
def _compiled(n):
    return bytes(2000) + str(n).encode()


_N = [0]


@pytest.mark.harness_leaks(budget="0.5s")
def test_bounded_lru():
    _N[0] += 1
    _compiled(_N[0])
    _work()


@pytest.mark.harness_leaks(budget="0.5s")
def test_clean():
    d = {i: str(i) for i in range(100)}
    assert len(d) == 100
    _work()
'''


def _outcomes(text: str) -> dict[str, str]:
    """Each test's outcome, from the summary's harness section."""
    return {name: outcome for outcome, name in
            re.findall(r"^(PASSED|FAILED) \S+::(\w+): ", text, re.M)}


def test_undecided_leaks_run_on_and_fail_and_a_filling_lru_passes(
        pytester: pytest.Pytester) -> None:
    # GIVEN the four classes, each at a budget of 0.5 s (~300 calls)
    pytester.makepyfile(test_classes=CLASSES)
    # WHEN pytest runs them with the plugin's defaults
    got = run_plugin(pytester, "-rA")
    out = got.stdout.str()
    said = _outcomes(out)
    # THEN both leaks that grow without end fail as leaks, and the LRU that fills over
    # 1,024 calls and the clean test pass: each decided, never by a size guess
    assert said == {"test_per_type_cache": "FAILED",
                    "test_reraised_module_exception": "FAILED",
                    "test_bounded_lru": "PASSED", "test_clean": "PASSED"}, out
    assert re.search(r"test_per_type_cache: leak ", out), out
    # (the LRU and the clean test may be left undecided only by a host too busy to read
    # their step times, and then say so, the session's summary too: on CI's machine, at a
    # load of 4.5 a CPU, a clean test's CPU time per step rose 1.12x in a run that waited
    # most of its time, once read as a slowdown; beside two busy loops, load ~14, the
    # LRU's steps, each ~0.5 ms of the same sum, read 2.15x late over early, seen in one
    # run: a suspicion, `one-run`, not a finding)
    host_busy = "harness: host busy: the marked tests' calls took" in out
    warned = re.findall(r"::(\w+)\n\s+\S+: PytestWarning: harness: undecided, passed: (.*)",
                        out)
    busy = [name for name, text in warned
            if name in ("test_clean", "test_bounded_lru") and host_busy
            and (("(rule busy-host)" in text and "busy host" in text)
                 or ("(rule one-run)" in text and "a busy host" in text))]
    lru = re.search(r"test_bounded_lru: (plateau|ok|ambiguous) ", out)
    assert lru is not None and (lru.group(1) != "ambiguous" or "test_bounded_lru" in busy), out
    assert out.count("undecided, passed") == len(busy), out
    # AND the runs past the first are said once, apart from the budgets, with the bounds
    line = re.search(r"harness: (\d+) test\(s\) ran on past an undecided first run, "
                     r"(\d+) decided, (\d+) still undecided: ([0-9.]+) s past their first "
                     r"runs \(each within 16x its budget, --harness-overrun; 5 min a "
                     r"session, --harness-allowance\)", out)
    assert line is not None, out
    assert int(line.group(1)) >= 2 and int(line.group(3)) <= len(busy), line.group(0)


def test_no_allowance_runs_nothing_on_and_says_so(pytester: pytest.Pytester) -> None:
    # GIVEN the LRU alone, and no allowance for running on
    pytester.makepyfile(test_classes=CLASSES)
    got = run_plugin(pytester, "-rA", "-k", "bounded_lru", "--harness-allowance", "0")
    out = got.stdout.str()
    # THEN it ran within 4 budgets, and the summary says the allowance stopped it
    assert "ran on past an undecided first run" not in out, out
    assert "harness: the allowance was spent: 1 later test(s) ran within 4 budgets" in out, out


@pytest.mark.parametrize(("flag", "value", "words"), [
    ("--harness-overrun", "1", "a whole number, 2 or more"),
    ("--harness-overrun", "many", "a whole number, 2 or more"),
    ("--harness-allowance", "soon", "a duration, e.g. --harness-allowance 5m"),
])
def test_a_bad_bound_is_refused_by_name(pytester: pytest.Pytester, flag: str, value: str,
                                        words: str) -> None:
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    got = run_plugin(pytester, flag, value)
    assert got.ret == pytest.ExitCode.USAGE_ERROR, got.stdout.str()
    assert f"{flag} {value!r}" in got.stderr.str() and words in got.stderr.str(), \
        got.stderr.str()


def test_the_bounds_and_the_summary_lines() -> None:
    # a test's overrun is the session's, less what would pass the allowance left, and
    # none (the check's own 4) once that leaves 4 budgets or fewer
    run_on = RunOn(16, 10.0)
    assert run_on.overrun_for(0.5) == 16
    assert run_on.overrun_for(2.0) == 6
    run_on.spent = 9.0
    assert run_on.overrun_for(0.5) is None
    lines = summary_lines([(True, 3.0), (False, 2.5)], [30.0, 10.0], RunOn(16, 300.0), 2)
    assert lines[0].startswith("harness: 2 test(s) ran on past an undecided first run, 1 "
                               "decided, 1 still undecided: 5.5 s past"), lines
    assert "2 later test(s) ran within 4 budgets" in lines[1], lines
    assert "host busy: the marked tests' calls took 30.0 s of wall clock for 10.0 s of " \
           "their own time (3.0x)" in lines[2], lines
    # a quiet session says no host busy
    assert summary_lines([], [10.5, 10.0], RunOn(16, 300.0)) == []
