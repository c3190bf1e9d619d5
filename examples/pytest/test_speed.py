"""A step-time test (docs/pytest.md): `--harness-save main` keeps its run,
`--harness-compare main` compares a later run's step times with it."""

import pytest


@pytest.mark.harness_time(budget="1s")
def test_sorts_a_thousand():
    sorted(range(1000, 0, -1))
