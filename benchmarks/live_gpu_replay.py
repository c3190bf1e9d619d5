"""Early stop on real GPU leaks: the recorded H100 series replayed through the live
decision, sample by sample, per memory source (issue 20).

Each recorded cell's samples (tests/data/h100/: real agent records from an H100 with
PyTorch and JAX, an early-stop run `gpu-live` and a fixed-length run of 1500 calls
`gpu-real`) are fed record by record, in file order, to

- `LiveDecider` as the sweep builds it (`analysis.sequential.LiveDecider`: every source
  allowed to carry a leak; exact counters allowed a steady-growth decision), and
- the same decider on each source alone (heap, uss+rss, gpu, fw).

It prints, per cell, the first look the settings allow (the first sample at or after
`min_iterations` measured calls), the call at which the sweep's decider decides and on
which source, and the call at which each source alone decides. A recorded early-stop
run ends where the sweep that made it decided (call 270 on the heap for gpu_leak), so a
source that needs longer than that has no decision there ("-"); the fixed-length run
shows each source over 1500 calls. Target: a 1 MiB/call device leak decided within
three samples of the first look (60 measured calls at the defaults).

Run: python benchmarks/live_gpu_replay.py [--min-iterations 50] [--max-iterations 3000]
     [--quick]     (about a second; --quick: the early-stop run's cells only, for CI)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.analysis.records import LiveDecision
from harness.analysis.sequential import SOURCES, LiveDecider, replay_live
from harness.protocol.ingest import Record, Series, read_samples
from harness.thresholds import AnalysisConfig

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "h100"


def first_look(series: Series, min_iterations: int) -> int | None:
    """Measured calls at the first sample the live test may decide on."""
    warm = max((s["i"] for s in series.samples if s.get("phase") != "measure"), default=0)
    calls = sorted(s["i"] - warm for s in series.samples if s.get("phase") == "measure")
    return next((c for c in calls if c >= min_iterations), None)


def alone(cfg: AnalysisConfig, series: Series, source: str, low: int, top: int
          ) -> LiveDecision | None:
    """The decision of a decider that tests `source` alone."""
    decider = LiveDecider(cfg, low, top, source, floor=cfg.live_floor_bytes,
                          min_growth=cfg.live_min_growth_bytes,
                          decay_ratio=cfg.live_decay_ratio)
    for fields in series.samples:
        if (found := decider.feed(Record("sample", 0, fields))) is not None:
            return found
    return None


def said(d: LiveDecision | None, source: bool = True) -> str:
    if d is None:
        return "-"
    return f"{d.verdict} {d.iterations}" + (f" ({d.source})" if source else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-iterations", type=int, default=50)
    ap.add_argument("--max-iterations", type=int, default=3000)
    ap.add_argument("--quick", action="store_true", help="the early-stop run only")
    args = ap.parse_args()
    cfg = AnalysisConfig()
    low, top = args.min_iterations, args.max_iterations
    # Builds the decider once to check the bounds (a clear error, not a traceback).
    LiveDecider(cfg, low, top)
    print(f"live decision: floor {cfg.live_floor_bytes:.0f} B/call, alpha {cfg.alpha:g}, "
          f"min_iterations {low}, max_iterations {top}; calls are measured calls\n")
    print("| run | cell | first look | decided | " + " | ".join(SOURCES) + " |")
    print("|---|---|---|---|" + "---|" * len(SOURCES))
    for run in ("gpu-live",) if args.quick else ("gpu-live", "gpu-real"):
        for cell in sorted((DATA / run / "cells").iterdir()):
            series = read_samples(cell / "samples.jsonl")
            look = first_look(series, low)
            now = replay_live(cfg, series, low, top)
            each = [said(alone(cfg, series, s, low, top), source=False) for s in SOURCES]
            name = cell.name.removeprefix("torch.gpu0.")
            print(f"| {run} | {name} | {look if look is not None else '-'} | {said(now)} | "
                  + " | ".join(each) + " |")


if __name__ == "__main__":
    main()
