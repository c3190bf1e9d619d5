"""The xdist groups tests/conftest.py gives (CI runs the tests with `-n N --dist
loadgroup`): the Slurm tests share one worker, and so do a module's tests that read one
module-scoped fixture of it; a test marked xdist_group keeps its own, others go free."""

from __future__ import annotations

import pytest
from workers import xdist_group_of

MODULE = """
import pytest

@pytest.fixture(scope="module")
def swept():
    return 1

@pytest.fixture
def fresh():
    return 2

@pytest.mark.slurm
def test_queue(swept):
    pass

def test_reads(swept):
    pass

def test_own(fresh):
    pass

@pytest.mark.xdist_group("mine")
def test_marked(swept):
    pass
"""


def test_slurm_and_a_modules_fixture_readers_share_a_group(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nmarkers =\n    slurm: shares the cluster\n")
    pytester.makepyfile(test_shared=MODULE)
    items, _ = pytester.inline_genitems()
    module = items[0].nodeid.split("::")[0]
    assert {item.name: xdist_group_of(item) for item in items} == {
        "test_queue": "slurm", "test_reads": module, "test_own": None, "test_marked": None}
