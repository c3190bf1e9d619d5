"""Two tests run by harness's pytest plugin (docs/pytest.md): each test function is the
step, called over and over in a child process; a leak fails the test."""

import pytest

CACHE = []


@pytest.fixture
def record():
    return {"id": 7, "name": "x" * 100}


@pytest.mark.harness_leaks(budget="1s")
def test_remembers_every_record(record):
    CACHE.append(dict(record))      # keeps a copy per call: a leak


@pytest.mark.harness_leaks(budget="1s")
def test_sums_a_record(record):
    sum(len(str(v)) for v in record.values())
