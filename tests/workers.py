"""Which tests share a pytest-xdist worker.

With pytest-xdist (`-n N --dist loadgroup`, as CI runs the tests) the tests of one
xdist_group run on one worker, one after another. Groups given here:
- "slurm": every test marked `slurm`. They share the single-node cluster's queue and its
  two GPUs (a test counts on the third job waiting; another takes the node down).
- a module's own name: its tests that use a module-scoped fixture of that module (a
  sweep made once and read by several tests), so the fixture is made once, not once on
  each worker.
A test marked xdist_group itself keeps its own group.
"""

from __future__ import annotations

import pytest


def xdist_group_of(item: pytest.Item) -> str | None:
    """The xdist_group tests/conftest.py marks `item` with (see above); None for none."""
    if item.get_closest_marker("xdist_group") is not None:
        return None
    if item.get_closest_marker("slurm") is not None:
        return "slurm"
    info = getattr(item, "_fixtureinfo", None)
    module = item.nodeid.split("::", 1)[0]
    for name in getattr(item, "fixturenames", ()):
        for fixturedef in (info.name2fixturedefs.get(name, ()) if info else ()):
            if fixturedef.scope == "module" and fixturedef.baseid == module:
                return module
    return None
