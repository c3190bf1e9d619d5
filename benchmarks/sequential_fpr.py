"""False leaks of the live decision under repeated looks, next to naive re-testing.

Simulated heap series (glibc in-use bytes read after gc.collect() and malloc_trim,
sampled every `sequential.SPACING` iterations after a 10-iteration warm-up, first look at
`sequential.FIRST_LOOK`; --every and --first-look change them) are fed sample by sample to

- `LiveDecider` (looks after every sample; stops at its first decision), and
- the NAIVE loop: `memory_trend` on the heap series so far after every sample (with the
  heap floor, as `verdict.trends` uses), stopping at the first "leak".

It prints the false-leak rate of both on stable and plateau series (each over `--runs`
seeded series of `--iterations` measured iterations; the naive loop on the first
`--naive-runs`, next to one memory_trend at the end), then the power and the median
iterations to a decision of `LiveDecider` for leaks of 256 B, 1, 4 and 16 KiB/call.

The series: a level of 4-64 MiB; per interval, exact zero with probability 0.3-0.8,
else Laplace jitter of 16-256 B; allocator level toggles (alloc then free) of 1-256 KiB
at 0.5-3 % of intervals; a GC sawtooth whose rise stays below the floor; a warm-up
transient that decays (a tcache/free-list fill of up to 64 KiB, time constant 5-50
iterations); and heavy-tailed single jumps (Pareto, from 4 KiB) at 1 % of intervals.
Plateaus add a ratchet (2-6 steps of 16 KiB-1 MiB in the first half) or a fill of
64 KiB-4 MiB with a time constant of 5-50 iterations. A linear fill that lasts longer
than a decision takes is a leak while it lasts; no live test can tell, so none is drawn.
Leaks add rate x iteration, delivered in per-call chunks with 10 % jitter.

Run: python benchmarks/sequential_fpr.py [--runs 2000] [--leak-runs 500] [--naive-runs 300]
     [--iterations 1000] [--seed 9]     (about 3 minutes on 2 cores)
     [--quick]     (--quick: 4 series per kind of 300 iterations: CI's smoke run)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.analysis.memory import memory_trend
from harness.analysis.sequential import FIRST_LOOK, SPACING, LiveDecider
from harness.protocol.ingest import Record
from harness.thresholds import AnalysisConfig

Array = npt.NDArray[np.float64]
KiB = 1024.0
MiB = 1024.0 * KiB
EVERY = SPACING               # the live schedule (--every, --first-look change them)
WARMUP = 10
MIN_ITERATIONS = FIRST_LOOK
CFG = AnalysisConfig()
FLOOR_BYTES = CFG.live_floor_bytes   # the per-call floor of the one decision
HEAP_CFG = dataclasses.replace(CFG, leak_floor_bytes=CFG.heap_floor_bytes)
LEAK_RATES = (256.0, 1 * KiB, 4 * KiB, 16 * KiB)


def stable(rng: np.random.Generator, t: Array) -> Array:
    """Heap bytes at iterations `t` (t[0] = end of warm-up) of a series that does not leak."""
    n = t.size
    steps = rng.laplace(0.0, rng.uniform(16, 256), n)
    steps[rng.random(n) < rng.uniform(0.3, 0.8)] = 0.0
    y = rng.uniform(4, 64) * MiB + np.cumsum(np.round(steps / 16) * 16)
    # A level that is one of three (alloc / free of an arena chunk or a cache), at random.
    levels = np.array([0.0, *np.cumsum(rng.uniform(1 * KiB, 256 * KiB, 2))])
    rate = rng.uniform(0.005, 0.03)
    state, level = 0, np.empty(n)
    for k in range(n):
        if rng.random() < rate:
            state = int(rng.integers(0, 3))
        level[k] = levels[state]
    y += level
    # GC sawtooth whose rise rate is below the floor (above it, it reads as a leak).
    rise = rng.uniform(0.0, 0.5 * FLOOR_BYTES)
    period = rng.uniform(50, 500)
    y += rise * period * np.mod(t / period + rng.uniform(), 1.0)
    # Warm-up transient that decays: free lists, tcache, type caches filling.
    s = t - t[0]
    y += rng.uniform(0, 64 * KiB) * (1 - np.exp(-s / rng.uniform(5, 50)))
    # Rare heavy-tailed single jumps, up or down, that stay.
    jumps = (rng.random(n) < 0.01) * (4 * KiB) * (1 + rng.pareto(1.5, n))
    y += np.cumsum(jumps * rng.choice([-1.0, 1.0], n))
    return y


def plateau(rng: np.random.Generator, t: Array) -> Array:
    y = stable(rng, t)
    s = t - t[0]
    if rng.random() < 0.5:
        k = int(rng.integers(2, 7))
        at = rng.uniform(0, s[-1] / 2, k)
        return y + (s[:, None] >= at[None, :]) @ rng.uniform(16 * KiB, 1 * MiB, k)
    return y + rng.uniform(64 * KiB, 4 * MiB) * (1 - np.exp(-s / rng.uniform(5, 50)))


def leak(rate: float) -> Callable[[np.random.Generator, Array], Array]:
    def make(rng: np.random.Generator, t: Array) -> Array:
        grown = np.cumsum(rate * np.diff(t, prepend=t[0]) * rng.uniform(0.9, 1.1, t.size))
        return stable(rng, t) + np.round(grown / 16) * 16
    return make


def records(t: Array, y: Array) -> list[Record]:
    """Step samples as `SeriesReader` keeps them: the warm-up's last, then measured ones."""
    out = [Record("sample", 1, {"type": "sample", "src": "step", "phase": "warmup",
                                "i": int(t[0]), "heap": float(y[0]), "dt": []})]
    for n, (i, v) in enumerate(zip(t[1:], y[1:], strict=True), 2):
        out.append(Record("sample", n, {"type": "sample", "src": "step", "phase": "measure",
                                        "i": int(i), "heap": float(v), "dt": []}))
    return out


def live(t: Array, y: Array, max_iter: int) -> tuple[str | None, int]:
    d = LiveDecider(CFG, MIN_ITERATIONS, max_iter)
    for rec in records(t, y):
        got = d.feed(rec)
        if got is not None:
            return got.verdict, got.iterations
    return None, max_iter


def naive(t: Array, y: Array) -> tuple[bool, bool]:
    """(leak at any look, leak at the end only) of memory_trend on the heap series."""
    once = memory_trend("heap", t[1:], y[1:], HEAP_CFG).kind == "leak"
    for k in range(CFG.min_samples, t.size):
        if memory_trend("heap", t[1 : k + 1], y[1 : k + 1], HEAP_CFG).kind == "leak":
            return True, once
    return False, once


def one(job: tuple[str, float, int, int, bool]) -> tuple[str | None, int, tuple[bool, bool]]:
    kind, rate, seed, iterations, with_naive = job
    rng = np.random.default_rng(seed)
    t = np.arange(WARMUP, WARMUP + iterations + 1, EVERY, dtype=np.float64)
    make = {"stable": stable, "plateau": plateau}.get(kind) or leak(rate)
    y = make(rng, t)
    verdict, at = live(t, y, iterations)
    return verdict, at, naive(t, y) if with_naive else (False, False)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="4 series per kind (2 per leak rate, 2 naive) of 300 iterations")
    p.add_argument("--runs", type=int, default=2000)
    p.add_argument("--iterations", type=int, default=1000)
    p.add_argument("--leak-runs", type=int, default=500)
    p.add_argument("--naive-runs", type=int, default=300,
                   help="series per kind re-tested naively (each look is a full fit)")
    p.add_argument("--seed", type=int, default=9)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--every", type=int, default=SPACING,
                   help="iterations between samples (default: sequential.SPACING)")
    p.add_argument("--first-look", type=int, default=FIRST_LOOK,
                   help="measured iterations before a decision (sequential.FIRST_LOOK)")
    args = p.parse_args(argv)
    global EVERY, MIN_ITERATIONS
    EVERY, MIN_ITERATIONS = args.every, args.first_look   # forked workers inherit them
    started = time.perf_counter()
    if args.quick:
        args.runs, args.leak_runs, args.naive_runs, args.iterations = 4, 2, 2, 300
    jobs: list[tuple[str, float, int, int, bool]] = []
    for k, kind in enumerate(("stable", "plateau")):
        jobs += [(kind, 0.0, args.seed * 10**7 + k * 10**6 + r, args.iterations,
                  r < args.naive_runs) for r in range(args.runs)]
    for k, rate in enumerate(LEAK_RATES):
        jobs += [("leak", rate, args.seed * 10**7 + (k + 2) * 10**6 + r, args.iterations,
                  False) for r in range(args.leak_runs)]
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(one, jobs, chunksize=64))
    alpha = CFG.alpha
    print(f"Live decision: the one memory decision on the samples so far, per-call floor "
          f"{FLOOR_BYTES:.0f} B/call, "
          f"alpha {alpha}, looks after every sample (every {EVERY} iterations), "
          f"min {MIN_ITERATIONS} / max {args.iterations} measured iterations.\n")
    print("| series | runs | LiveDecider false leaks | LiveDecider 'stable' | undecided "
          "| naive runs | memory_trend once at the end | naive: memory_trend after every sample |")
    print("|---|---|---|---|---|---|---|---|")
    for k, kind in enumerate(("stable", "plateau")):
        part = results[k * args.runs : (k + 1) * args.runs]
        fl = sum(v == "leak" for v, _, _ in part)
        m = max(1, min(args.naive_runs, len(part)))
        every = sum(hit[0] for _, _, hit in part[:m])
        once = sum(hit[1] for _, _, hit in part[:m])
        st = sum(v == "stable" for v, _, _ in part)
        ok = "<=" if fl / len(part) <= alpha else ">"
        print(f"| {kind} | {len(part)} | {fl} ({fl / len(part):.2%}, {ok} alpha) | {st} | "
              f"{len(part) - fl - st} | {m} | {once} ({once / m:.1%}) | "
              f"{every} ({every / m:.1%}) |")
    print("\n| leak B/call | runs | called leak (power) | called stable | "
          "median iterations to leak | 95th percentile |")
    print("|---|---|---|---|---|---|")
    for k, rate in enumerate(LEAK_RATES):
        first = 2 * args.runs + k * args.leak_runs
        part = results[first : first + args.leak_runs]
        hits = [at for v, at, _ in part if v == "leak"]
        st = sum(v == "stable" for v, _, _ in part)
        med = f"{np.median(hits):.0f}" if hits else "-"
        p95 = f"{np.percentile(hits, 95):.0f}" if hits else "-"
        print(f"| {rate:.0f} | {len(part)} | {len(hits) / len(part):.1%} | {st} | {med} | "
              f"{p95} |")
    print(f"\n({time.perf_counter() - started:.0f} s on {args.jobs} processes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
