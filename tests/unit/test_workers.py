"""The xdist groups tests/conftest.py gives (CI runs the tests with `-n N --dist
loadgroup`): the Slurm tests share one worker, and so do a module's tests that read one
module-scoped fixture of it; a test marked xdist_group keeps its own, others go free."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

HERE = "tests/unit/test_workers.py"


@pytest.fixture(scope="module")
def shared() -> list[str]:
    return ["made once for the module"]


def group(item: Any) -> list[str]:
    return [m.args[0] for m in item.iter_markers("xdist_group")]


def test_a_reader_of_a_module_fixture_is_in_its_modules_group(
        shared: list[str], request: pytest.FixtureRequest) -> None:
    assert group(request.node) == [HERE]


def test_a_test_without_one_is_in_no_group(request: pytest.FixtureRequest) -> None:
    assert group(request.node) == []


class Item:
    """As much of a pytest.Item as the grouping reads."""

    def __init__(self, *marks: pytest.MarkDecorator) -> None:
        self.marks = [m.mark for m in marks]
        self.nodeid = f"{HERE}::test_x"
        self.fixturenames: list[str] = []

    def get_closest_marker(self, name: str) -> Any:
        return next((m for m in self.marks if m.name == name), None)


def test_slurm_tests_share_one_group_and_a_marked_test_keeps_its_own(
        root_conftest: ModuleType) -> None:
    group_of = root_conftest.xdist_group_of
    assert group_of(Item(pytest.mark.slurm)) == "slurm"
    assert group_of(Item(pytest.mark.slurm, pytest.mark.xdist_group("x"))) is None
    assert group_of(Item(pytest.mark.docker)) is None
