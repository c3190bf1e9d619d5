"""Fixtures of the agent's tests."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

AGENT_DIR = Path(__file__).resolve().parents[2] / "harness" / "agent"


def _agent_module(name: str, *imports: str) -> Iterator[ModuleType]:
    """The agent's module `name`, imported as the agent imports it (its folder on
    sys.path), and forgotten afterwards with the agent's modules it `imports`."""
    sys.path.insert(0, str(AGENT_DIR))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(AGENT_DIR))
        for done in (name, *imports):
            sys.modules.pop(done, None)


@pytest.fixture()
def writer() -> Iterator[ModuleType]:
    """The agent's writer module (and the readers and fields modules it imports)."""
    yield from _agent_module("writer", "readers", "fields")


@pytest.fixture()
def readers() -> Iterator[ModuleType]:
    """The agent's readers module (and the fields module it imports)."""
    yield from _agent_module("readers", "fields")


@pytest.fixture()
def stepper() -> Iterator[ModuleType]:
    """The agent's stepper module (and the readers and fields modules it imports)."""
    yield from _agent_module("stepper", "readers", "fields")
