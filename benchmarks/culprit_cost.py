"""Probes `harness culprit` needs to name the change among n, beside undoing one change at
a time, with noise-free and noisy probes.

Both searches are the code the CLI drives (`harness.culprit.search.find_culprit`,
and `one_at_a_time`, B with each change undone alone, then G with the changes that fixed
it applied) run against simulated hybrids: the cause is one change drawn uniformly from
n (`single`), or two changes that only matter together (`pair`). A probe is one hybrid
cell; a hybrid the driver already has (G itself: B with everything undone on the local
runtime) is counted too, so the figures are an upper bound on cell runs.

Noise, per probe, with probability p:
- `untestable`: the hybrid cannot be built or run (a version conflict): untestable.
- `ambiguous`: the cell's verdict is undecided; the driver runs it once more
  (`--repeats 1`, counted as a second run), undecided again (p^2) is untestable.

"exact" is the share of searches that named exactly the true cause, proved both ways.
Goal (machine-independent, checked in --quick too): without noise every single cause
among n is exact within `expected_probes(n)` = 2 + 2*ceil(log2 n) probes.

Run: python benchmarks/culprit_cost.py [--trials N] [--quick]
     (--quick: 30 trials per size: CI's smoke run, the no-noise goal still checked)
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.culprit.search import (
    BAD,
    GOOD,
    UNDO,
    UNTESTABLE,
    Search,
    expected_probes,
    find_culprit,
    one_at_a_time,
)

SIZES = (1, 2, 4, 8, 16, 40, 64, 128)
QUICK_SIZES = (1, 2, 8, 40)
NOISE = (("none", 0.0), ("untestable", 0.1), ("ambiguous", 0.1))
Method = Callable[[list[int], Callable[[str, tuple[int, ...]], str]], Search[int]]
METHODS: tuple[tuple[str, Method], ...] = (("ddmin", find_culprit),
                                           ("one at a time", one_at_a_time))


def trial(method: Method, n: int, cause: frozenset[int], noise: str, p: float,
          rng: random.Random) -> tuple[int, float, bool]:
    """(probes, cell runs, exact?) of one simulated search."""
    runs = [0.0]
    items = list(range(n))

    def probe(side: str, changes: tuple[int, ...]) -> str:
        at_b = set(items) - set(changes) if side == UNDO else set(changes)
        truth = BAD if cause <= at_b else GOOD
        runs[0] += 1
        if noise == "untestable" and rng.random() < p:
            return UNTESTABLE
        if noise == "ambiguous" and rng.random() < p:
            runs[0] += 1
            if rng.random() < p:
                return UNTESTABLE
        return truth

    found = method(items, probe)
    exact = found.found and frozenset(found.answer) == cause
    return len(found.probes), runs[0], exact


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    trials = 30 if args.quick else args.trials
    sizes = QUICK_SIZES if args.quick else SIZES
    rng = random.Random(args.seed)
    failed: list[str] = []
    print(f"culprit search: {trials} simulated searches per cell (probes: mean / max; "
          "runs: mean cell runs; exact: the true cause named, proved both ways)\n")
    print("| cause | n | noise | ddmin probes | ddmin runs | ddmin exact | one-at-a-time "
          "probes | one-at-a-time runs | one-at-a-time exact | ratio of runs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for kind in ("single", "pair"):
        for n in sizes:
            if kind == "pair" and n < 2:
                continue
            for noise, p in NOISE:
                cells: list[str] = []
                mean_runs: list[float] = []
                for name, method in METHODS:
                    probes, runs, exact = [], [], 0
                    for _ in range(trials):
                        cause = frozenset(rng.sample(range(n), 1 if kind == "single" else 2))
                        k, r, ok = trial(method, n, cause, noise, p, rng)
                        probes.append(k)
                        runs.append(r)
                        exact += ok
                    mean_runs.append(statistics.fmean(runs))
                    cells += [f"{statistics.fmean(probes):.1f} / {max(probes)}",
                              f"{statistics.fmean(runs):.1f}", f"{100 * exact / trials:.0f} %"]
                    if name == "ddmin" and kind == "single" and noise == "none" and (
                            exact != trials or max(probes) > expected_probes(n)):
                        failed.append(f"n={n}: {exact}/{trials} exact, at most "
                                      f"{max(probes)} probes (goal {expected_probes(n)})")
                ratio = mean_runs[1] / mean_runs[0] if mean_runs[0] else float("nan")
                print(f"| {kind} | {n} | {noise}{f' {p:.0%}' if p else ''} | "
                      + " | ".join(cells) + f" | {ratio:.2f}x |")
    if failed:
        print("\nGOAL MISSED: " + "; ".join(failed))
        return 1
    print(f"\ngoal met: every single cause exact within 2 + 2*ceil(log2 n) probes "
          f"(n={', '.join(map(str, sizes))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
