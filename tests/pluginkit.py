"""Running the pytest plugin on a generated test file, as its tests do (pytester)."""

from __future__ import annotations

import importlib.metadata

import pytest


def plugin_args(*named: str) -> list[str]:
    """Where the package is installed with its entry point (`pip install -e .`, as CI
    does), pytest loads the plugin itself; else it is named. The other installed plugins
    (hypothesis, xdist, ...) are left out unless `named` (`-p NAME` arguments) names them:
    a user who installed harness need not have them, and they cost an inner session
    about 0.2 CPU-s to import, of some 150 sessions the suite starts."""
    names = {e.name for e in importlib.metadata.entry_points(group="pytest11")}
    return others_off(*named) + ([] if "harness" in names else ["-p", "harness.pytest_plugin"])


def others_off(*named: str) -> list[str]:
    """`-p no:NAME` for each installed pytest plugin but harness's and those `named`
    (`-p NAME` arguments) names."""
    names = {e.name for e in importlib.metadata.entry_points(group="pytest11")}
    wanted = {named[i + 1] for i in range(len(named) - 1) if named[i] == "-p"}
    return [a for name in sorted(names - {"harness"} - wanted) for a in ("-p", f"no:{name}")]


# How long an inner pytest session may take before it is called hung: a guard against a
# hang, never a claim on speed. One that took 94 s on a quiet 2-core runner passed 120 s
# beside two busy loops (CI112); a real hang still ends the test.
HANG_S = 900.0


def run_plugin(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest in a subprocess of pytester's folder, the plugin loaded, no cache."""
    return pytester.runpytest_subprocess(*plugin_args(*args), "-p", "no:cacheprovider",
                                         *args, timeout=HANG_S)
