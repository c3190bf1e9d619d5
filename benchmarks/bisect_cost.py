"""Cell runs `harness bisect` needs for 8..128 images, against a full sweep of the row.

The planner (`harness.search.plan_bisect`, the same code the CLI drives) is run
against simulated verdicts: the culprit is drawn uniformly from images 1..n-1, and
each probe comes back `ambiguous` with probability p (the cell must run again; after
`repeats` extra runs the image is skipped). A cell run is one probe. Goal: 40 images in
<= 8 runs without noise (2 endpoints + ceil(log2(39)) = 6 halvings).

"exact" is the share of bisects that named the true first bad with its last good as
the neighbour before it; the rest found a range around a skipped image, or stopped
on an endpoint that stayed undecided.

Run: python benchmarks/bisect_cost.py [--trials N]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.bisect import expected_probes
from harness.search import plan_bisect

SIZES = (8, 16, 32, 40, 64, 128)
NOISE = (0.0, 0.1, 0.3)
GOAL = (40, 8)


def one(n: int, culprit: int, p: float, repeats: int, rng: random.Random) -> tuple[int, bool]:
    """(cell runs, exact answer?) of one simulated bisect."""
    observed: dict[int, list[str]] = {}
    runs = 0
    while True:
        step = plan_bisect(n, observed, repeats)
        if step.action != "probe":
            exact = step.action == "found" and (step.lo, step.hi) == (culprit - 1, culprit)
            return runs, exact
        assert step.index is not None
        runs += 1
        verdict = "ambiguous" if rng.random() < p else (
            "leak" if step.index >= culprit else "ok")
        observed.setdefault(step.index, []).append(verdict)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(1)
    head = ["images", "full sweep", "bound"]
    for p in NOISE:
        head += [f"p={p:g} mean", f"p={p:g} max", f"p={p:g} exact"]
    head.append("mean/full at p=0.1")
    print(f"cell runs per bisect, {args.trials} trials each, ambiguous probability p, "
          f"repeats={args.repeats}\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "---:|" * len(head))
    ok = True
    for n in SIZES:
        line = [str(n), str(n), str(expected_probes(n))]
        ratio = ""
        for p in NOISE:
            runs, exact = [], 0
            for _ in range(args.trials):
                r, e = one(n, rng.randrange(1, n), p, args.repeats, rng)
                runs.append(r)
                exact += e
            mean = sum(runs) / len(runs)
            line += [f"{mean:.2f}", str(max(runs)), f"{exact / args.trials:.1%}"]
            if p == 0.0 and n == GOAL[0]:
                ok = max(runs) <= GOAL[1]
            if p == 0.1:
                ratio = f"{mean / n:.2f}"
        print("| " + " | ".join([*line, ratio]) + " |")
    print(f"\ngoal: {GOAL[0]} images in <= {GOAL[1]} runs without noise: "
          f"{'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
