"""Time `memory_trend` and `step_trend` on 10^4, 10^5 and 10^6 samples (goal: < 1 s each).

Memory series longer than `AnalysisConfig.max_points` are binned to medians of
consecutive samples before the O(n^2) Theil-Sen fit, so the cost is O(n) in the
binning plus a constant. Prints a markdown table with the ratio of the best of three
runs to the 1 s goal.

Run: python benchmarks/analysis_speed.py [--quick]
     (--quick: 10^4 samples, one run each, the goal not checked: CI's smoke run)
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.analysis.memory import memory_trend
from harness.analysis.stepreading import step_trend
from harness.thresholds import AnalysisConfig

GOAL_S = 1.0
SIZES = (10**4, 10**5, 10**6)


def best_of(runs: int, call: Callable[[], object]) -> float:
    """Return the shortest wall time of `runs` calls of `call`."""
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    """Print the table; return 1 if any size misses the goal (not with --quick)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true",
                    help="10^4 samples, one run each, goal not checked (seconds)")
    args = ap.parse_args(argv)
    sizes, runs = (SIZES[:1], 1) if args.quick else (SIZES, 3)
    cfg = AnalysisConfig()
    rng = np.random.default_rng(4)
    print("| samples | memory_trend s | step_trend s | ratio to 1 s goal |")
    print("|---:|---:|---:|---:|")
    missed = False
    for n in sizes:
        iters = np.arange(n, dtype=np.float64) * 10.0
        rss = 800 * 2**20 + 16 * 1024 * iters + rng.normal(0, 256 * 1024, n)
        steps = rng.lognormal(np.log(0.05), 0.1, n)
        mem_s = best_of(runs, partial(memory_trend, "rss", iters, rss, cfg))
        step_s = best_of(runs, partial(step_trend, steps, cfg))
        worst = max(mem_s, step_s)
        missed |= worst >= GOAL_S
        print(f"| {n:,} | {mem_s:.4f} | {step_s:.4f} | {worst / GOAL_S:.3f} |")
    if args.quick:
        print("(--quick: the goal is not checked on a smoke run)")
        return 0
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
