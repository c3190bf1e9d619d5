"""A sample's time and RSS are read as its line is written (writer.py): samples of the
timer thread and of the stepping thread land in the order of their readings, so the
last sample in the file holds the latest RSS (the safety stop's test reads it)."""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path
from types import ModuleType


class GrowingReaders:
    """RSS one page more at every read; the timer thread's USS read waits until the
    test lets it go, as a real one waits on smaps_rollup or the GIL."""

    def __init__(self) -> None:
        self.pages = itertools.count(1)
        self.timer_reading = threading.Event()
        self.go = threading.Event()

    def rss_and_anon(self) -> tuple[int, int]:
        rss = next(self.pages) * 4096
        return rss, rss

    def uss(self, force: bool = False) -> int:
        if threading.current_thread() is not threading.main_thread():
            self.timer_reading.set()
            assert self.go.wait(10)
        return 0

    def kids(self, force: bool = False) -> None:
        return None

    def cgroup_bytes(self) -> None:
        return None

    def threads(self) -> int:
        return 2


def test_a_timer_sample_held_up_lands_with_the_rss_of_its_writing(
        writer: ModuleType, tmp_path: Path) -> None:
    # GIVEN a timer sample held up between its readings while the stepping thread
    # writes a step sample
    out = tmp_path / "samples.jsonl"
    sampler = writer.Sampler(writer.Writer(str(out), echo=False), heap_enabled=False)
    readers = GrowingReaders()
    sampler.readers = readers
    timer = threading.Thread(target=sampler.snapshot, args=("timer",))
    timer.start()
    assert readers.timer_reading.wait(10)
    sampler.snapshot("step", [0.001])
    readers.go.set()
    timer.join(10)
    sampler.writer.close()
    # THEN the file's samples rise in RSS and time in file order, the timer's last
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["src"] for r in rows] == ["step", "timer"]
    assert rows[0]["rss"] < rows[1]["rss"] and rows[0]["t"] <= rows[1]["t"]
    assert all(r["rss_anon"] == r["rss"] for r in rows)
