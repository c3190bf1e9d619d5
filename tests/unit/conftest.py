"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from fakeregistry import Registry, serve


@pytest.fixture
def registry() -> Iterator[Registry]:
    """The loopback registry of tests/fakeregistry.py, running for one test."""
    with serve() as reg:
        yield reg


ROOT_CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"


@pytest.fixture
def root_conftest(request: pytest.FixtureRequest) -> ModuleType:
    """tests/conftest.py as loaded in this run (its guards and hooks, to call)."""
    for plugin in request.config.pluginmanager.get_plugins():
        if isinstance(plugin, ModuleType) and getattr(plugin, "__file__", None) == str(
                ROOT_CONFTEST):
            return plugin
    raise AssertionError("tests/conftest.py is not loaded")
