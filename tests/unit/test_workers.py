"""The xdist groups tests/conftest.py gives (CI runs the tests with `-n N --dist
loadgroup`): the Slurm tests share one worker, and so do a module's tests that read one
module-scoped fixture of it; a test marked xdist_group keeps its own, others go free."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

HERE = "tests/unit/test_workers.py"


@pytest.fixture(autouse=True)
def _not_in_ci_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    """The order outside CI's setup: CI names its ready file while the suite runs."""
    monkeypatch.delenv("HARNESS_CI_ENGINES_READY", raising=False)
    monkeypatch.delenv("HARNESS_CI_IMAGES_PENDING", raising=False)


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
    """As much of a pytest.Item as the grouping and the ordering read."""

    def __init__(self, *marks: pytest.MarkDecorator, name: str = "test_x") -> None:
        self.marks = [m.mark for m in marks]
        self.nodeid = f"{HERE}::{name}"
        self.fixturenames: list[str] = []

    def get_closest_marker(self, name: str) -> Any:
        return next((m for m in self.marks if m.name == name), None)

    def iter_markers(self) -> Any:
        return iter(self.marks)


def test_slurm_tests_share_one_group_and_a_marked_test_keeps_its_own(
        root_conftest: ModuleType) -> None:
    group_of = root_conftest.xdist_group_of
    assert group_of(Item(pytest.mark.slurm)) == "slurm"
    assert group_of(Item(pytest.mark.slurm, pytest.mark.xdist_group("x"))) is None
    assert group_of(Item(pytest.mark.docker)) is None


def test_under_xdist_the_heaviest_unit_of_work_is_handed_out_first(
        root_conftest: ModuleType) -> None:
    # GIVEN a plain test, three plain tests of one group between others, a slow test
    # and a test on an engine, in the files' order
    g = pytest.mark.xdist_group("g")
    items = [Item(name="plain"), Item(g, name="g1"), Item(pytest.mark.slow, name="slow"),
             Item(g, name="g2"), Item(pytest.mark.docker, name="docker"),
             Item(g, name="g3")]
    # WHEN they are ordered for xdist
    order = [i.nodeid.rsplit("::", 1)[1] for i in root_conftest.heaviest_first(items)]
    # THEN the slow test first, then the engine's, then the group's three together in
    # their own order (three plain tests outweigh one), the lone plain test last
    assert order == ["slow", "docker", "g1", "g2", "g3", "plain"]


def test_a_slow_test_that_says_its_seconds_is_weighed_by_them(
        root_conftest: ModuleType) -> None:
    # GIVEN two slow tests of the default weight, then one that says it takes 90 s, and a
    # group of three slow tests of 10 s each
    g = pytest.mark.xdist_group("g")
    items = [Item(pytest.mark.slow, name="slow1"), Item(pytest.mark.slow, name="slow2"),
             Item(g, pytest.mark.slow(seconds=10), name="g1"),
             Item(pytest.mark.slow(seconds=90), name="long"),
             Item(g, pytest.mark.slow(seconds=10), name="g2"),
             Item(g, pytest.mark.slow(seconds=10), name="g3")]
    # WHEN they are ordered for xdist
    order = [i.nodeid.rsplit("::", 1)[1] for i in root_conftest.heaviest_first(items)]
    # THEN the 90-second test first, the group's 30 s next, the default ones in order
    assert order == ["long", "g1", "g2", "g3", "slow1", "slow2"]


def heavy_in_two_lanes() -> list[Item]:
    """Two heavy tests that start containers and two that run here alone, the
    container ones first in the files, and a plain one."""
    d, slow = pytest.mark.docker, pytest.mark.slow
    return [Item(d, slow(seconds=90), name="e1"), Item(d, slow(seconds=80), name="e2"),
            Item(slow(seconds=70), name="h1"), Item(slow(seconds=60), name="h2"),
            Item(name="plain")]


def with_the_slurm_group() -> list[Item]:
    """`heavy_in_two_lanes` and the Slurm group: a test on Slurm and Docker, then one on
    the cluster alone."""
    grouped = pytest.mark.xdist_group("slurm")
    return [*heavy_in_two_lanes(),
            Item(grouped, pytest.mark.slurm, pytest.mark.docker, name="s_docker"),
            Item(grouped, pytest.mark.slurm, name="s_alone")]


def ordered(root_conftest: ModuleType, items: list[Item]) -> list[str]:
    """The tests' names in the order `heaviest_first` hands them out."""
    return [i.nodeid.rsplit("::", 1)[1] for i in root_conftest.heaviest_first(items)]


def test_units_on_an_engine_and_units_on_this_machine_are_handed_out_in_turns(
        root_conftest: ModuleType) -> None:
    # GIVEN two heavy tests that start containers and two that run here alone, the
    # container ones first in the files
    items = heavy_in_two_lanes()
    # WHEN they are ordered for xdist
    order = [i.nodeid.rsplit("::", 1)[1] for i in root_conftest.heaviest_first(items)]
    # THEN the heaviest first, then the lane that has had less weight: not both
    # container tests at once (their first starts wait on the disk together)
    assert order == ["e1", "h1", "h2", "e2", "plain"]


def test_in_ci_the_slurm_group_starts_first_its_cluster_only_tests_before_the_rest(
        root_conftest: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the tests in two lanes, and the Slurm group of a light test on the cluster
    # alone after one that also needs Docker's images, while CI sets the engines up and
    # says the cluster's setup apart
    monkeypatch.setenv("HARNESS_CI_ENGINES_READY", "ready")
    monkeypatch.setenv("HARNESS_CI_SLURM_READY", "slurm-ready")
    items = with_the_slurm_group()
    order = ordered(root_conftest, items)
    # THEN the group first though lighter than the rest, the test on the cluster alone
    # before the one that waits for the images; then the two lanes in turns, as outside CI
    assert order == ["s_alone", "s_docker", "e1", "h1", "h2", "e2", "plain"]
    # AND without the cluster's own file the group is a unit on an engine like the others
    monkeypatch.delenv("HARNESS_CI_SLURM_READY")
    order = ordered(root_conftest, items)
    assert order == ["e1", "h1", "h2", "e2", "plain", "s_docker", "s_alone"]


def test_while_ci_builds_the_images_every_unit_that_runs_here_comes_first(
        root_conftest: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the tests in two lanes and the Slurm group, while CI sets the engines up and
    # says its images are still to build (minutes: a unit on an engine would hold its
    # worker waiting for them)
    monkeypatch.setenv("HARNESS_CI_ENGINES_READY", "ready")
    monkeypatch.setenv("HARNESS_CI_SLURM_READY", "slurm-ready")
    monkeypatch.setenv("HARNESS_CI_IMAGES_PENDING", "1")
    items = with_the_slurm_group()
    order = ordered(root_conftest, items)
    # THEN the Slurm group first as before, then every unit here, heaviest first, then
    # those on an engine, heaviest first
    assert order == ["s_alone", "s_docker", "h1", "h2", "plain", "e1", "e2"]


def test_a_recorded_wall_time_weighs_a_test_before_its_marks(
        root_conftest: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a slow test the recorded run saw end in 3 s, and a plain one it saw take 200 s
    items = [Item(pytest.mark.slow(seconds=90), name="marked"), Item(name="recorded")]
    monkeypatch.setattr(root_conftest, "DURATIONS", {f"{HERE}::marked": 3.2,
                                                     f"{HERE}::recorded": 200})
    # THEN the recorded times decide the order
    order = [i.nodeid.rsplit("::", 1)[1] for i in root_conftest.heaviest_first(items)]
    assert order == ["recorded", "marked"]


def test_the_recorded_wall_times_name_tests_that_exist() -> None:
    # the weights are read by node id: one that names no test is stale
    import json
    from pathlib import Path
    names = json.loads((Path(__file__).parents[1] / "durations.json").read_text())
    files = {n.split("::", 1)[0] for n in names}
    root = Path(__file__).parents[2]
    assert all((root / f).is_file() for f in files), sorted(
        f for f in files if not (root / f).is_file())
    for f in files:
        text = (root / f).read_text(encoding="utf-8")
        tests = {n.split("::", 1)[1].split("[", 1)[0] for n in names if n.startswith(f + "::")}
        assert all(f"def {t.split('::')[-1]}(" in text for t in tests), (f, tests)


def test_a_test_on_the_cluster_alone_waits_for_the_cluster_not_the_images(
        root_conftest: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    ready, slurm_ready = tmp_path / "ready", tmp_path / "slurm-ready"
    monkeypatch.setenv("HARNESS_CI_ENGINES_READY", str(ready))
    monkeypatch.setenv("HARNESS_CI_SLURM_READY", str(slurm_ready))
    monkeypatch.setattr(root_conftest, "ENGINES_WAIT_S", 0.5)
    slurm_ready.write_text("ok\n", encoding="utf-8")
    root_conftest.wait_for_engines(Item(pytest.mark.slurm, name="s"))     # no wait
    with pytest.raises(pytest.fail.Exception, match="not set up after"):
        root_conftest.wait_for_engines(Item(pytest.mark.slurm, pytest.mark.docker, name="d"))
    slurm_ready.write_text("failed: slurm\n", encoding="utf-8")
    with pytest.raises(pytest.fail.Exception, match="failed: slurm"):
        root_conftest.wait_for_engines(Item(pytest.mark.slurm, name="s"))


def test_a_test_on_an_engine_waits_for_ci_to_set_it_up(
        root_conftest: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    ready = tmp_path / "ready"
    monkeypatch.setenv("HARNESS_CI_ENGINES_READY", str(ready))
    monkeypatch.setattr(root_conftest, "ENGINES_WAIT_S", 0.5)
    root_conftest.wait_for_engines(Item(name="plain"))      # needs none: no wait
    with pytest.raises(pytest.fail.Exception, match="not set up after"):
        root_conftest.wait_for_engines(Item(pytest.mark.docker, name="e"))
    ready.write_text("failed: images\n", encoding="utf-8")
    with pytest.raises(pytest.fail.Exception, match="failed: images"):
        root_conftest.wait_for_engines(Item(pytest.mark.podman, name="e"))
    ready.write_text("ok\n", encoding="utf-8")
    root_conftest.wait_for_engines(Item(pytest.mark.slurm, name="e"))
