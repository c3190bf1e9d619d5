"""The second real H100 run of this session (tests/data/h100/explain-1123): a sweep of
examples/gpu-torch.yaml's torch cells and `harness explain` of the GPU slowdown, on a lent
H100 with PyTorch 2.11.

- The constant- and variable-input rfft controls were `ambiguous` after three runs
  (1500, 3000, 6000 calls): the heap wandered +0.28 MiB, just over its floor, with a slope
  interval that holds 0. One gc.collect() after the last call left the heap below where
  the measured phase began: nothing was kept, so they are stable (`ok`), with a note.
- The spin-waiting slowdown's attribution: the late samples sit in the scenario's
  `torch.cuda.synchronize()` line, and torch.profiler's cudaDeviceSynchronize time rose.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.analysis.where import diff, parse_where
from harness.reanalyze import reanalyze
from harness.result.model import CellResult
from harness.store import SeriesCache
from harness.store.gate import read_run
from harness.thresholds import AnalysisConfig

RUN = Path(__file__).resolve().parents[1] / "data" / "h100" / "explain-1123"


@pytest.fixture(scope="module")
def cells() -> dict[str, CellResult]:
    results, _ = reanalyze(read_run(RUN).results, SeriesCache(RUN), AnalysisConfig())
    return {cid.removeprefix("torch.gpu0."): r for cid, r in results.items()}


@pytest.mark.parametrize("cell", ["torch_rfft_constant", "torch_rfft_variable"])
def test_heap_that_one_collection_takes_back_is_stable_not_undecided(
        cells: dict[str, CellResult], cell: str) -> None:
    recorded = json.loads((RUN / "cells" / f"torch.gpu0.{cell}" / "result.json").read_text())
    assert recorded["verdict"] == "ambiguous"          # what the sweep said on the device
    res = cells[cell]
    assert res.verdict == "ok", res.reason
    assert "cyclic garbage" in res.reason
    assert any(f.text.startswith("garbage:") for f in res.findings)


def test_the_gpu_leak_stays_a_leak(cells: dict[str, CellResult]) -> None:
    assert (cells["gpu_leak"].verdict, cells["gpu_leak"].carrier) == ("leak", "gpu")


def test_the_spin_wait_slowdown_is_attributed_to_synchronize() -> None:
    where = json.loads((RUN / "cells" / "torch.gpu0.gpu_slowdown" / "where.json").read_text())
    w = parse_where(where["record"])
    lines = diff(None, w, "gpu_slowdown.py", "", "torch")
    top = lines[0]
    assert top.startswith("time: ") and "gpu_slowdown.py:19 step -> torch synchronize" in top
    assert int(top.split("time: ")[1].split("%")[0]) >= 80, top
    ops = {o.name: o for o in w.ops}
    sync = ops["cudaDeviceSynchronize"]
    assert sync.late_us > 3 * sync.early_us


def test_the_device_leak_is_attributed_to_its_line_by_pytorchs_allocator_history() -> None:
    """`harness explain DIR torch.gpu0.gpu_leak` on the H100 (its where.json kept here):
    PyTorch's CUDA allocator history names the scenario's line, 1 MiB per call."""
    where = json.loads((RUN / "cells" / "torch.gpu0.gpu_leak" / "where.json").read_text())
    w = parse_where(where["record"])
    [site] = w.sites["device"]
    assert site.frames[0][1:] == (13, "step") and site.frames[0][0].endswith("gpu_leak.py")
    assert site.size / w.calls == 1024 * 1024
    [line] = diff(None, w, "gpu_leak.py", "", "torch")[1:2]
    assert line.startswith("device: +1.0 MiB/call at gpu_leak.py:13 step"), line
