"""Cell runs `harness bisect` needs for 8..128 images, against a full sweep of the row.

The planner (`harness.answers.search.plan_bisect`, the same code the CLI drives) is run
against simulated verdicts: the culprit is drawn uniformly from images 1..n-1, and
each probe comes back `ambiguous` with probability p (the cell must run again; after
`repeats` extra runs the image is skipped). A cell run is one probe. Goal: 40 images in
<= 8 runs without noise (2 endpoints + ceil(log2(39)) = 6 halvings).

"exact" is the share of bisects that named the true first bad with its last good as
the neighbour before it; the rest found a range around a skipped image, or stopped
on an endpoint that stayed undecided.

Noise model `--noise busy` (issue 12): each probe (and each confirmation run) ran on a
busy host with probability p; a busy probe's pooled comparison with the first image
says good or bad at random. Without confirmation (`--rounds 0`) that answer is used.
With it, the agent's measured run-queue delay triggers interleaved rounds (as a pooled
"slower" does): busy rounds are left out and replaced, up to 2 x rounds in all, and
two or more usable rounds give the true answer; fewer leave the probe undecided
(ambiguous: probed again). Confirmation runs are half a cell long and count as half a
run. `--noise ambiguous` is the model above; there, a CLI probe (`Sweep.run_cell`)
already re-runs an ambiguous cell `repeats` (2) times itself, which `--cell-repeats 2`
models (a probe is ambiguous with probability p^3).

Run: python benchmarks/bisect_cost.py [--trials N] [--noise ambiguous|busy]
     [--rounds 3] [--cell-repeats 0] [--quick]
     (--quick: 20 trials per size: CI's smoke run, the no-noise goal still checked)
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.answers.search import plan_bisect
from harness.bisect import expected_probes

SIZES = (8, 16, 32, 40, 64, 128)
NOISE = (0.0, 0.1, 0.3)
GOAL = (40, 8)


def probe(truth: str, p: float, args: argparse.Namespace, rng: random.Random
          ) -> tuple[str, float]:
    """(verdict, cell runs) of one probe under the chosen noise model."""
    if args.noise == "ambiguous":
        runs = 0.0
        for _ in range(1 + args.cell_repeats):
            runs += 1
            if rng.random() >= p:
                return truth, runs
        return "ambiguous", runs
    busy = rng.random() < p
    pooled = rng.choice(["ok", "regression"]) if busy else truth
    if args.rounds == 0 or not (busy or pooled == "regression"):
        return pooled, 1.0
    usable = attempts = 0
    while usable < args.rounds and attempts < 2 * args.rounds:
        attempts += 1
        usable += rng.random() >= p and rng.random() >= p   # baseline and suspect quiet
    verdict = truth if usable >= 2 else "ambiguous"
    return verdict, 1.0 + attempts * 2 * 0.5


def one(n: int, culprit: int, p: float, repeats: int, rng: random.Random,
        args: argparse.Namespace) -> tuple[float, bool]:
    """(cell runs, exact answer?) of one simulated bisect."""
    observed: dict[int, list[str]] = {}
    runs = 0.0
    while True:
        step = plan_bisect(n, observed, repeats)
        if step.action != "probe":
            exact = step.action == "found" and (step.lo, step.hi) == (culprit - 1, culprit)
            return runs, exact
        assert step.index is not None
        truth = "regression" if step.index >= culprit else "ok"
        if step.index == 0 and args.noise == "busy":
            verdict, cost = "ok", 1.0   # the baseline is compared with nothing
        else:
            verdict, cost = probe(truth, p, args, rng)
        runs += cost
        observed.setdefault(step.index, []).append(verdict)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--noise", choices=("ambiguous", "busy"), default="ambiguous")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cell-repeats", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="20 trials per size (seconds)")
    args = parser.parse_args()
    if args.quick:
        args.trials = 20
    rng = random.Random(1)
    head = ["images", "full sweep", "bound"]
    for p in NOISE:
        head += [f"p={p:g} mean", f"p={p:g} max", f"p={p:g} exact"]
    head.append("mean/full at p=0.1")
    what = ("ambiguous probability p" if args.noise == "ambiguous" else
            f"busy-host probability p, rounds={args.rounds}")
    print(f"cell runs per bisect, {args.trials} trials each, {what}, "
          f"repeats={args.repeats}, cell repeats={args.cell_repeats}\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "---:|" * len(head))
    ok = True
    confirming = args.noise == "busy" and args.rounds > 0
    for n in SIZES:
        line = [str(n), str(n), str(expected_probes(n))]
        ratio = ""
        for p in NOISE:
            runs, exact = [], 0
            for _ in range(args.trials):
                r, e = one(n, rng.randrange(1, n), p, args.repeats, rng, args)
                runs.append(r)
                exact += e
            mean = sum(runs) / len(runs)
            line += [f"{mean:.2f}", f"{max(runs):g}", f"{exact / args.trials:.1%}"]
            if p == 0.0 and n == GOAL[0] and not confirming:
                ok = max(runs) <= GOAL[1]
            if p == 0.1:
                ratio = f"{mean / n:.2f}"
        print("| " + " | ".join([*line, ratio]) + " |")
    if confirming:
        print(f"\n(the goal of {GOAL[0]} images in <= {GOAL[1]} runs counts probes without "
              "confirmation rounds: run with --rounds 0)")
    else:
        print(f"\ngoal: {GOAL[0]} images in <= {GOAL[1]} runs without noise: "
              f"{'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
