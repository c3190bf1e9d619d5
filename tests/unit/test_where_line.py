"""Issue 86 item 4: the line a checked leak names is the line that keeps the memory:
never a one-time read (linecache reading a source file for a warning, an import), never
the plugin's own file around the test, and never a site faster than the leak itself (a
short run divides a one-time allocation by few calls: "+34.0 KiB/call ... ->
linecache.py updatecache", 5.7x the leak's own +6.0 KiB/call). And the warnings a marked
test's calls show reach pytest's warnings summary, as they do without the marker."""

from __future__ import annotations

import re

import pytest
from pluginkit import run_plugin
from resultkit import as_result

from harness.analysis.where import Site, Where, one_time
from harness.api.run import _lines

pytest_plugins = ["pytester"]


def test_one_time_reads_the_wrapper_and_faster_sites_are_never_named() -> None:
    # GIVEN a where run of 300 calls of a test that keeps 6 KiB a call at line 15, whose
    # warning's source line was read once (linecache), whose module imported once, and
    # whose wrapper (the plugin's scenario file) made its arguments
    calls = 300
    test = "/x/test_mod.py"
    sites = (
        Site(((test, 15, "test_leaks"),), size=6144 * calls),
        Site((("/py/lib/linecache.py", 137, "updatecache"),
              (test, 14, "test_leaks")), size=34 * 1024 * calls),
        Site((("<frozen importlib._bootstrap_external>", 729, "exec_module"),
              (test, 13, "test_leaks")), size=20 * 1024 * calls),
        Site((("/w/_harness_check.py", 45, "step"),), size=9 * 1024 * calls),
        Site(((test, 16, "test_leaks"),), size=40 * 1024 * calls),
    )
    found = Where(calls, ("heap",), {"heap": sites})
    result = as_result({"verdict": "leak", "memory": {"heap": {
        "source": "heap", "kind": "leak", "slope": 6200.0, "missed": 60.0}}})

    def test_leaks() -> None:
        return None

    test_leaks.__code__ = test_leaks.__code__.replace(co_filename=test)
    # WHEN its lines are named
    lines = _lines(found, test_leaks, result)
    # THEN only the line that keeps the memory is: not linecache's read, not the import,
    # not the wrapper, not line 16's 40 KiB/call (6.5x the leak's own rate)
    assert len(lines) == 1 and re.match(r"heap: \+6\.0 KiB/call at test_mod\.py:15 ",
                                        lines[0]), lines
    assert one_time("t.py:3 f -> linecache.py updatecache")
    assert one_time("t.py:3 f -> <frozen importlib._bootstrap> _load")
    assert not one_time("t.py:3 f -> multidict pop") and not one_time("t.py:3 f")


WARNS = '''
import warnings

import pytest


@pytest.mark.harness_leaks(budget="0.3s")
def test_clean_warns():
    warnings.warn("a clean test's own warning", RuntimeWarning)


@pytest.mark.harness_leaks(budget="0.3s")
@pytest.mark.parametrize("make", [lambda: 1])
def test_run_in_a_fork_warns(make):
    warnings.warn("warned from a fork", UserWarning)
'''


def test_a_marked_tests_warnings_reach_pytests_summary(pytester: pytest.Pytester) -> None:
    # GIVEN two marked tests that warn, one run in the warm child, one in a fork
    pytester.makepyfile(test_warns=WARNS)
    got = run_plugin(pytester, "-rA")
    out = got.stdout.str()
    # THEN both pass, and pytest's warnings summary lists each warning at its own line
    # (before: raised in the child, never shown)
    got.assert_outcomes(passed=2, warnings=2)
    assert re.search(r"test_warns\.py:8: RuntimeWarning: a clean test's own warning", out), out
    assert re.search(r"test_warns\.py:14: UserWarning: warned from a fork", out), out
