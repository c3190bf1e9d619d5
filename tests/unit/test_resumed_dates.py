"""Issue 87 item 2: a resumed run's dates and totals are the sweep's: started at its
first start, resumed at the resumption, took the sum of its parts, and the cells its
earlier part finished counted as ran (the resumption reused them), in results.json and
report.html; before: `ran: 0; reused: 4; took: 46 ms; started:` the resumption's."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from sweepkit import on_the_cli, write_matrix

from harness.cli import main
from harness.report.html import meta_items


def test_a_resumed_sweep_is_dated_and_counted_as_the_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on_the_cli(monkeypatch, None)
    path = write_matrix(tmp_path, ["v1", "v2", "v3", "v4"], ["loop.py"], name="whole")
    out = tmp_path / "reports"
    # GIVEN a sweep that ran its four cells, two of which are then lost (as if it had
    # been stopped before them)
    assert main(["sweep", str(path), "--out", str(out), "-q"]) == 0
    (run,) = (out / "whole").iterdir()
    first = json.loads((run / "results.json").read_text())["meta"]
    for cell in ("v3.gpu0.loop", "v4.gpu0.loop"):
        shutil.rmtree(run / "cells" / cell)
    time.sleep(1.1)     # the resumption starts a second later at least
    # WHEN it is resumed
    assert main(["sweep", str(path), "--out", str(out), "-q", "--resume"]) == 0
    meta = json.loads((run / "results.json").read_text())["meta"]
    # THEN it is dated as the sweep, resumed as the resumption, its time the parts' sum
    assert meta["started"] == pytest.approx(first["started"], abs=1e-3), (first, meta)
    assert meta["resumed"] >= first["started"] + 1.0, meta
    assert meta["seconds"] >= first["seconds"], (first, meta)
    # AND its two parts ran four cells in all, none reused from another sweep
    assert (meta["ran"], meta["reused"]) == (4, 0), meta
    said = dict(meta_items(meta))
    assert said["started"] != said["resumed"] and said["started"].endswith("UTC"), said
