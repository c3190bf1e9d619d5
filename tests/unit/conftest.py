"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fakeregistry import Registry, serve


@pytest.fixture
def registry() -> Iterator[Registry]:
    """The loopback registry of tests/fakeregistry.py, running for one test."""
    with serve() as reg:
        yield reg
