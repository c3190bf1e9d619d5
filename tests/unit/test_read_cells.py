"""A results directory's cells read with Python's cycle collector paused (results hold
no cycles; its passes over the objects they make were most of `harness history`'s
reading), and the collector as it was afterwards, whatever happened."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.errors import InputError
from harness.result.model import CellResult
from harness.store import results
from tests.resultkit import as_result


def cells(root: Path, *ids: str, bad: str = "") -> None:
    for cid in ids:
        d = root / "cells" / cid
        d.mkdir(parents=True)
        data = as_result({"id": cid, "row": "r"}).to_json()
        if cid == bad:
            data["verdict"] = "fine"
        (d / "result.json").write_text(json.dumps(data))


@pytest.fixture
def collector() -> Iterator[None]:
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


def test_cells_are_read_with_the_collector_paused_and_it_runs_again_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, collector: None) -> None:
    cells(tmp_path, "a", "b")
    seen: list[bool] = []
    load = results.load_result

    def watched(data: object, where: str = "result") -> CellResult:
        seen.append(gc.isenabled())
        return load(data, where)
    monkeypatch.setattr(results, "load_result", watched)
    gc.enable()
    assert set(results.read_cells(tmp_path).results) == {"a", "b"}
    assert seen == [False, False] and gc.isenabled()


def test_a_bad_cell_leaves_the_collector_as_it_was(tmp_path: Path, collector: None) -> None:
    cells(tmp_path, "a", "b", bad="b")
    gc.enable()
    with pytest.raises(InputError, match="verdict: expected one of"):
        results.read_cells(tmp_path)
    assert gc.isenabled()
    gc.disable()        # a caller that paused it itself keeps it paused
    results.read_cells(tmp_path / "none")
    assert not gc.isenabled()
