"""A cell's cgroup is removed once what was left in it has gone: tried again after
1 ms, then after waits that double, within 0.2 s in all (each check of a test suite
removes one; a killed process leaves within a millisecond or two)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from harness.runtimes import local
from harness.runtimes.local import CellCgroup


class Clock:
    """The module's `time` (monotonic, sleep): a sleep moves the clock on, and
    `on_sleep` sees each wait."""

    def __init__(self, on_sleep: Callable[[int], None] | None = None) -> None:
        self.now = 100.0
        self.waits: list[float] = []
        self.on_sleep = on_sleep

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds
        if self.on_sleep is not None:
            self.on_sleep(len(self.waits))


def _busy(tmp_path: Path) -> Path:
    """A folder rmdir refuses (it holds a file, as a cgroup holds a process), with an
    empty cgroup.procs: nothing to kill."""
    box = tmp_path / "harness-1-0-cell"
    box.mkdir()
    (box / "cgroup.procs").write_text("")
    return box


def test_it_is_tried_again_after_1_ms_then_waits_that_double(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    box = _busy(tmp_path)

    def leaves(n: int) -> None:     # what was left has gone after the third wait
        if n == 3:
            (box / "cgroup.procs").unlink()

    clock = Clock(leaves)
    monkeypatch.setattr(local, "time", clock)
    CellCgroup(box, 1).remove()
    assert not box.exists()
    assert clock.waits == [0.001, 0.002, 0.004]


def test_one_that_stays_busy_is_given_up_after_0_2_s(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    box = _busy(tmp_path)
    clock = Clock()
    monkeypatch.setattr(local, "time", clock)
    CellCgroup(box, 1).remove()
    assert box.exists()
    assert sum(clock.waits) == pytest.approx(0.2)
    # 1 + 2 + ... + 64 ms, then the 73 ms left
    assert clock.waits[:-1] == [0.001 * 2**k for k in range(7)]
    assert clock.waits[-1] == pytest.approx(0.073)


def test_a_cgroups_memory_is_read_as_an_engines_stats_give_it(tmp_path: Path) -> None:
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    v1.mkdir()
    for name, value in (("usage_in_bytes", "300"), ("max_usage_in_bytes", "400"),
                        ("limit_in_bytes", "9223372036854771712")):   # no limit
        (v1 / f"memory.{name}").write_text(value + "\n")
    (v1 / "memory.stat").write_text("cache 8\nrss 200\nrss_huge 0\ntotal_rss 999\n")
    assert local.memory_now(v1, 1) == {"usage": 300, "max_usage": 400, "limit": None,
                                            "rss": 200}
    v2.mkdir()
    (v2 / "memory.current").write_text("300\n")
    (v2 / "memory.max").write_text("1048576\n")
    (v2 / "memory.stat").write_text("anon 100\nfile 200\n")
    # memory.peak came in Linux 5.19: without it there is no max_usage
    assert local.memory_now(v2, 2) == {"usage": 300, "max_usage": None,
                                            "limit": 1048576, "rss": 100}
    (v2 / "memory.peak").write_text("500\n")
    (v2 / "memory.max").write_text("max\n")
    assert local.memory_now(v2, 2) == {"usage": 300, "max_usage": 500, "limit": None,
                                            "rss": 100}
    assert local.memory_now(tmp_path / "gone", 1) is None
