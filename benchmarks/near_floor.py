"""The near-floor rule (issue 20 point 4) side by side with the rule off, on the
detection benchmark's simulated series (benchmarks/detection.py).

The rule: growth under NEAR_FLOOR_MULTIPLE floors whose late slope is under
NEAR_FLOOR_DECAY of the whole-span slope is `ambiguous` (run again, longer), not `leak`.
It must not cost power on real leaks beyond the re-run it asks for, and it should only
take away false leaks. For each noise level this prints, with the rule on and off in one
run on the same seeded series: the power at 300 measured iterations for 1, 4, 16 and
64 KiB/iteration leaks, and the false-leak rate of stable and plateau series at 100,
300, 1000 and 3000 iterations.

Run: python benchmarks/near_floor.py [--runs 300] [--seed 4]     (about a minute)
     [--quick]     (--quick: 10 runs per cell: CI's smoke run, seconds)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import detection

from harness.analysis import rules
from harness.thresholds import AnalysisConfig


def shares(series: np.ndarray, cfg: AnalysisConfig) -> tuple[float, float]:
    """Share called leak with the rule on, and with it off."""
    on = detection.leak_share(series, cfg)
    saved = rules.NEAR_FLOOR_MULTIPLE
    rules.NEAR_FLOOR_MULTIPLE = 0.0      # no growth is under zero floors: rule off
    try:
        off = detection.leak_share(series, cfg)
    finally:
        rules.NEAR_FLOOR_MULTIPLE = saved
    return on, off


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--seed", type=int, default=4)
    ap.add_argument("--quick", action="store_true", help="10 runs per cell (seconds)")
    args = ap.parse_args()
    if args.quick:
        args.runs = 10
    cfg = AnalysisConfig()
    print("| noise | series | iterations | leak share, rule on | rule off |")
    print("|---|---|---|---|---|")
    for k, noise in enumerate(detection.NOISES):
        for rate in detection.RATES_KIB:
            rng = np.random.default_rng(args.seed + 100 * k + rate)
            on, off = shares(detection.leak(rng, args.runs, 300, noise, rate * 1024.0), cfg)
            print(f"| {noise.name} | leak {rate} KiB/it | 300 | {on:.3f} | {off:.3f} |")
        for name, make in detection.FAMILIES:
            for iters in detection.FP_ITERS:
                rng = np.random.default_rng(args.seed + 100 * k + iters)
                on, off = shares(make(rng, args.runs, iters, noise), cfg)
                print(f"| {noise.name} | {name} | {iters} | {on:.4f} | {off:.4f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
