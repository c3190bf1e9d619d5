"""Early stop on real GPU leaks: the recorded H100 series replayed through the live
decision, today's decider next to the heap-only one it replaced (issue 20).

Each recorded cell's samples (tests/data/h100/, real agent records from an H100 with
PyTorch and JAX) are fed record by record, in file order, to

- `LiveDecider` as the sweep builds it (`analysis.replay.live_decider`: heap, device
  memory and framework allocator, exact counters allowed a steady-growth decision), and
- the same decider on the heap alone (the decider before issue 20).

It prints, per cell, the call at which each decides and on which source, and the first
look the settings allow (the first sample at or after `min_iterations` measured calls).
The recorded runs stop where the sweep that made them decided, so a decider that needs
longer than that has no decision ("-").

Run: python benchmarks/live_gpu_replay.py [--min-iterations 50] [--max-iterations 3000]
     (under a second)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.analysis.config import AnalysisConfig
from harness.analysis.records import LiveDecision
from harness.analysis.replay import live_decider
from harness.analysis.sequential import LiveDecider
from harness.protocol.ingest import Record, Series, read_samples

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "h100"


def first(decider: LiveDecider, series: Series) -> LiveDecision | None:
    for fields in series.samples:
        found = decider.feed(Record("sample", 0, fields))
        if found is not None:
            return found
    return None


def first_look(series: Series, min_iterations: int) -> int | None:
    """Measured calls at the first sample the live test may decide on."""
    warm = max((s["i"] for s in series.samples if s.get("phase") != "measure"), default=0)
    calls = sorted(s["i"] - warm for s in series.samples if s.get("phase") == "measure")
    return next((c for c in calls if c >= min_iterations), None)


def said(d: LiveDecision | None) -> str:
    return f"{d.verdict} at {d.iterations} ({d.source})" if d is not None else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-iterations", type=int, default=50)
    ap.add_argument("--max-iterations", type=int, default=3000)
    args = ap.parse_args()
    cfg = AnalysisConfig()
    print(f"{'cell':34} {'first look':>10}  {'today':28} {'heap only':28} ratio")
    for cell in sorted((DATA / "gpu-live" / "cells").iterdir()):
        series = read_samples(cell / "samples.jsonl")
        look = first_look(series, args.min_iterations)
        now = first(live_decider(cfg, args.min_iterations, args.max_iterations), series)
        heap = first(LiveDecider(cfg, args.min_iterations, args.max_iterations, "heap",
                                 floor=cfg.live_floor_bytes,
                                 min_growth=cfg.live_min_growth_bytes,
                                 decay_ratio=cfg.live_decay_ratio), series)
        ratio = (f"{heap.iterations / now.iterations:.1f}x sooner"
                 if now is not None and heap is not None and now.verdict == heap.verdict
                 else "")
        print(f"{cell.name:34} {look if look is not None else '-':>10}  {said(now):28} "
              f"{said(heap):28} {ratio}")


if __name__ == "__main__":
    main()
