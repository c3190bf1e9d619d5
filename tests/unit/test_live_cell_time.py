"""Issue 78 point 1: while a budgeted cell waits on a busy host, its progress says so:
the budget is the cell's own time (the agent's `cell_s`), and the wall clock's stretch is
said beside it."""

from __future__ import annotations

import json
from pathlib import Path

from harness.report.live import budget_count, last_iteration


def test_a_quiet_host_shows_one_clock() -> None:
    assert budget_count(1200, 2.1, 2.0, 5.0) == "1,200 calls, 2.1/5 s"
    assert budget_count(1200, 2.1, None, 5.0) == "1,200 calls, 2.1/5 s"


def test_a_busy_host_says_how_long_the_cells_seconds_took() -> None:
    text = budget_count(1200, 31.0, 5.0, 5.0)
    assert text == "1,200 calls, 5.0/5 s of the cell's time (host busy: took 31 s)"


def test_the_last_step_sample_gives_the_cells_seconds(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    lines = [{"type": "sample", "src": "step", "phase": "measure", "i": 300, "t": 9.0,
              "cell_s": 2.5},
             {"type": "sample", "src": "timer", "phase": "measure", "i": 310, "t": 9.2}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines[:1]))
    assert last_iteration(path) == (300, "measure", 2.5)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert last_iteration(path) == (310, "measure", None)   # a timer sample: kept as was
