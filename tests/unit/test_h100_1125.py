"""Bounded caches and a small native leak on a real H100 (2026-11-25, examples/gpu-caches.yaml,
tests/data/h100/1125), decided again with today's code against their truth, measured
without harness before harness saw them (that folder's README and truth-*.jsonl).

Truth: PyTorch's cuFFT plan cache cycling 600 lengths fills for ~600 calls (tens of ms
each) and then holds; capped at 64 it churns at its bound; CuPy's 16-plan LRU over 40
lengths churns; JAX's compilation cache over 150 shapes holds, its malloc heap a
saw-tooth of ~4 MB every ~8,000 calls; seed 000's loop is clean; a kept 1 MiB CUDA tensor
per call, and a new cuFFT plan per call, leak (the plans, read at 5 s, after the longer
run rule `short` asks for); a GPU slowdown waits on the device.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.analysis.decision import within_run
from harness.analysis.sequential import LiveDecider
from harness.protocol.ingest import SeriesReader, read_samples
from harness.reanalyze import reanalyze
from harness.result.model import CellResult
from harness.runtimes.base import RunOutcome
from harness.store import SeriesCache
from harness.store.gate import read_run
from harness.thresholds import AnalysisConfig

DATA = Path(__file__).resolve().parents[1] / "data" / "h100" / "1125"


def redecided(run: Path) -> dict[str, CellResult]:
    results, _ = reanalyze(read_run(run).results, SeriesCache(run), AnalysisConfig())
    return {cid.removeprefix("gpu.gpu0."): r for cid, r in results.items()}


@pytest.fixture(scope="module")
def five() -> dict[str, CellResult]:
    """The sweep at harness's defaults (a 5 s budget per cell)."""
    return redecided(DATA / "sweep-5s")


@pytest.mark.slow(seconds=10)     # x3: the module fixture's tens of seconds, started early
@pytest.mark.parametrize("cell", ["cupy_fft", "torch_fft_cycle_capped", "torch_rfft"])
def test_the_caches_at_their_bound_and_the_control_are_clean(
        five: dict[str, CellResult], cell: str) -> None:
    assert five[cell].verdict in ("ok", "plateau"), five[cell].reason


def test_the_leaks_and_the_slowdown_are_found_with_their_carriers(
        five: dict[str, CellResult]) -> None:
    assert (five["gpu_leak"].verdict, five["gpu_leak"].carrier) == ("leak", "gpu")
    # A new cuFFT plan per call at ~9.7 ms: 524 calls in the 5 s budget, +153 MiB, too
    # few calls to tell it from a cache of as many plans (rule `short`): the cell runs
    # again until 2,000 calls, where it passes the 256 MiB that matter on their own;
    # read as the cell's last attempt, it is a leak
    plans = five["torch_fft_plans"]
    assert plans.verdict == "ambiguous" and plans.rule == "short", plans.reason
    series = read_samples(DATA / "sweep-5s" / "cells" / "gpu.gpu0.torch_fft_plans" /
                          "samples.jsonl")
    last = within_run(series, RunOutcome(exit_code=0), AnalysisConfig(), again=False)
    assert last.verdict == "leak", last.reason
    slow = five["gpu_wait_slowdown"]
    assert slow.verdict == "slowdown" and "GPU-bound" in slow.reason, slow.reason


def test_a_plan_cache_read_to_its_hits_is_no_leak_after_the_run_or_live() -> None:
    # GIVEN the plan cache over a 60 s budget: 600 misses (the heap +236 MiB, readings
    # every 10 calls), then 960 hits in 0.06 s (three readings). It read `leak`,
    # "+420 MiB over 1,360 calls", stopped live at call 1,040 as past the 256 MiB that
    # matters: the late window was the last third of the readings, all misses
    cell = redecided(DATA / "sweep-60s")["torch_fft_cycle"]
    assert cell.verdict == "plateau", cell.reason
    samples = DATA / "sweep-60s" / "cells" / "gpu.gpu0.torch_fft_cycle" / "samples.jsonl"
    assert read_samples(samples).measured > 1000
    reader, decider = SeriesReader(), LiveDecider(AnalysisConfig(), 50, 10**6)
    stops = [d for r in reader.feed_bytes(samples.read_bytes()) if (d := decider.feed(r))]
    assert not any(d.verdict == "leak" for d in stops), stops
