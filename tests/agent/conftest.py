"""Fixtures of the agent's tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

AGENT_DIR = Path(__file__).resolve().parents[2] / "harness" / "agent"


@pytest.fixture()
def writer() -> Iterator[ModuleType]:
    """The agent's writer module, imported as the agent imports it (its folder on
    sys.path), and forgotten afterwards with the reader module it imports."""
    sys.path.insert(0, str(AGENT_DIR))
    try:
        import writer as module
        yield module
    finally:
        sys.path.remove(str(AGENT_DIR))
        for name in ("writer", "readers"):
            sys.modules.pop(name, None)
