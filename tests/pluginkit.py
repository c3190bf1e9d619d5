"""Running the pytest plugin on a generated test file, as its tests do (pytester)."""

from __future__ import annotations

import importlib.metadata

import pytest


def plugin_args() -> list[str]:
    """Where the package is installed with its entry point (`pip install -e .`, as CI
    does), pytest loads the plugin itself; else it is named."""
    names = {e.name for e in importlib.metadata.entry_points(group="pytest11")}
    return [] if "harness" in names else ["-p", "harness.pytest_plugin"]


def run_plugin(pytester: pytest.Pytester, *args: str, timeout: float = 180
               ) -> pytest.RunResult:
    """pytest in a subprocess of pytester's folder, the plugin loaded, no cache."""
    return pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", *args,
                                         timeout=timeout)
