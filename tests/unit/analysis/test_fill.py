"""A leak or a cache still filling (issue 37): no leak verdict from a run too short to
tell them apart, in the post-run verdict and in the live decider alike."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from typing import Any

import numpy as np

from harness.analysis.decision import CellFacts, decide, within_run
from harness.analysis.memory import FILL_RERUN, fill_check
from harness.analysis.sequential import LiveDecider
from harness.protocol.ingest import Record, Series, parse_lines, read_samples
from harness.runtimes.base import RunOutcome
from harness.thresholds import AnalysisConfig

CFG = AnalysisConfig()
OK = RunOutcome(exit_code=0)
KiB, MiB = 1024.0, 1024.0 * 1024.0
GPU_REAL = Path(__file__).resolve().parents[2] / "data" / "h100" / "gpu-real" / "cells"


def lines(records: list[dict[str, Any]]) -> Series:
    return parse_lines([(json.dumps(r) + "\n").encode() for r in records])


def seeds_loop(seed: int = 3, rate: float = 512.0, n: int = 600, every: int = 10,
               jitter: float = 5.5 * KiB) -> list[dict[str, Any]]:
    """The issue's run: the seeds' FFT loop on an H100 for 600 calls, the heap ~199 MB
    rising ~0.5 KiB/call with the jitter of the recorded H100 heap (gpu-real: 5.5 KiB),
    one reading in the middle fallen back."""
    rng = random.Random(seed)
    recs: list[dict[str, Any]] = [{"type": "header", "schema": 1}]
    for k in range(every, n + 1, every):
        heap = 199e6 + rate * k + rng.gauss(0, jitter)
        if k == n // 2:
            heap -= 120 * KiB
        recs.append({"type": "sample", "src": "step", "phase": "measure", "i": k,
                     "t": k * 7e-5, "heap": int(heap), "dt": [7e-5] * every})
    recs.append({"type": "end", "status": "ok", "iterations": n})
    return recs


def test_the_seeds_loop_for_600_calls_is_ambiguous_with_the_figure_and_the_rerun() -> None:
    # GIVEN the 600 calls: +0.29 MiB on a 199 MB heap, a leak by the rule before
    series = lines(seeds_loop())
    assert within_run(series, OK, AnalysisConfig(fill_share=0)).verdict == "leak"
    # WHEN decided
    v = decide(CellFacts(CFG, series, OK))
    # THEN it is ambiguous: a leak or a cache still filling, and it says the growth, the
    # calls and the length of the run that settles it
    assert v.verdict == "ambiguous" and v.carrier == "heap", v.reason
    growth = round(v.memory["heap"].growth / KiB)
    assert 250 < growth < 350
    assert v.reason == (f"heap +{growth} KiB over 600 calls: a leak or a cache still "
                        "filling; running it again for 2,400")
    assert v.rerun == 600 * FILL_RERUN == 2400
    assert v.memory["heap"].kind == "ambiguous"


def test_the_same_rate_run_long_enough_is_a_leak() -> None:
    # GIVEN the same +0.5 KiB/call kept up for 9,600 calls (the second re-run's length)
    v = within_run(lines(seeds_loop(n=9600)), OK, CFG)
    # THEN no bounded fill fits it: a leak
    assert v.verdict == "leak", v.reason


def truncated(name: str, calls: int) -> Series:
    """A gpu-real cell's samples up to `calls` measured calls, as a run that long wrote
    them (its end record says so; the collection after the last call is left out)."""
    series = read_samples(GPU_REAL / f"torch.gpu0.{name}" / "samples.jsonl")
    assert series.header is not None and series.end is not None
    warm = series.header["config"]["warmup"]
    keep = [s for s in series.samples if s["phase"] != "measure" or s["i"] - warm <= calls]
    end = {k: v for k, v in series.end.items() if k != "collected"}
    end["iterations"] = min(calls, int(end["iterations"]))
    return lines([series.header, *keep, end])


def test_gpu_rfft_truncated_to_600_calls_is_no_leak_and_its_1500_calls_are_ok() -> None:
    short = decide(CellFacts(CFG, truncated("gpu_rfft", 600), OK, wants_gpu=True))
    assert short.verdict != "leak", short.reason
    assert short.verdict in ("ok", "ambiguous"), short.reason
    full = decide(CellFacts(CFG, truncated("gpu_rfft", 1500), OK, wants_gpu=True))
    assert full.verdict == "ok", full.reason


def feed(decider: LiveDecider, records: list[dict[str, Any]]) -> Any:
    for r in records:
        if (got := decider.feed(Record(r["type"], 0, r))) is not None:
            return got
    return None


def test_the_live_decider_does_not_stop_for_growth_a_fill_could_be() -> None:
    # GIVEN the run, with a steadier heap (0.5 KiB of jitter), fed to the live
    # decider: the rule before stopped it as a leak at its first look
    recs = seeds_loop(jitter=512.0)
    before = feed(LiveDecider(AnalysisConfig(fill_share=0, leak_large_bytes=1), 50, 3000,
                              "heap"), recs)
    assert before is not None and before.verdict == "leak", before
    # WHEN fed to today's
    got = feed(LiveDecider(CFG, 50, 3000, "heap"), recs)
    # THEN it runs on: +0.3 MiB on a 199 MB heap is a fill as well as a leak
    assert got is None, got


def test_a_leak_of_exact_bytes_every_call_stops_live_at_the_first_look() -> None:
    # GIVEN the device's memory growing 1 MiB every call (a kept CUDA tensor)
    recs = [{"type": "sample", "src": "step", "phase": "measure", "i": k,
             "gpu_used": int(600e6 + MiB * k), "dt": [7e-5] * 10}
            for k in range(0, 200, 10)]
    got = feed(LiveDecider(dataclasses.replace(CFG, leak_large_bytes=32 * MiB), 50, 3000,
                           "gpu"), recs)
    # THEN no fill fits a rate that never fell: a leak at 50 calls, once past the size
    # that matters whatever it is (here 32 MiB)
    assert got is not None and got.verdict == "leak" and got.iterations == 50, got


def test_fill_check_of_a_saturating_fill_and_of_a_straight_leak() -> None:
    t = np.arange(0, 3001, 10, dtype=np.float64)
    rng = np.random.default_rng(5)
    level = 200e6 + rng.normal(0, 2 * KiB, t.size)
    # A 32 MiB fill with a 1,000-call time constant: a fill fits, no larger than it
    filling = level + 32 * MiB * (1 - np.exp(-t / 1000))
    fill = fill_check(t, filling, CFG)
    assert fill.possible and fill.amplitude <= 32 * MiB
    assert fill.bound == CFG.fill_share * float(np.median(filling))
    # The same growth at a steady rate: its rate never fell, no bounded fill fits
    straight = fill_check(t, 200e6 + 32 * MiB * t / t[-1], CFG)
    assert not straight.possible and straight.amplitude > 1000 * straight.bound
    # And the check off (fill_share 0) excludes every fill
    assert not fill_check(t, filling, AnalysisConfig(fill_share=0)).possible
