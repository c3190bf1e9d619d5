"""Confirmation rounds under the sequential stop rule, next to the rule it replaced.

Per-round ratios (suspect / baseline median step time) are drawn log-normal around a
true ratio with a between-run spread `sd` (0.03 on a quiet host, 0.06-0.10 on this
project's busy 2-core machine), and fed round by round to `replicate.confirm`'s loop:
`decide_rounds` after each round, stopping when `settled` says so or at 2x `rounds` (6).

- SEQUENTIAL (`harness.analysis.baseline.settled`): stops once the interval lies on the
  no-change side of the threshold asked about (below min_ratio for a slowdown);
- BAND (the rule before): stopped on no change only once the interval lay wholly inside
  (1/min_ratio, min_ratio).

Both stop at a decided direction. The band rule stopped at disagreeing rounds too; the
sequential rule does so only where an improvement was asked about (issue 78): rounds that
disagree about a slowdown run on while more may settle it. It prints, per case, the mean
rounds run, how often each rule said "slower", and how often the sequential rule's
rounds ended open (`open`: their interval holds a slowdown as well as no change, the
verdict's rule `unsettled`, an `ambiguous` cell).

Run: python benchmarks/rounds_cost.py [--runs 2000] [--seed 5]     (a few seconds)
     [--quick]     (--quick: 50 runs per case, for CI)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.analysis.baseline import decide_rounds, settled
from harness.analysis.records import Confirmation, Direction, Round
from harness.analysis.rules import unsettled
from harness.thresholds import AnalysisConfig

Rule = Callable[[Confirmation, AnalysisConfig], bool]


def band_settled(conf: Confirmation, cfg: AnalysisConfig) -> bool:
    """The rule before: no change only inside the whole band (1/min_ratio, min_ratio)."""
    usable = [r.ratio for r in conf.rounds if r.excluded is None]
    if len(usable) < 2:
        return False
    if conf.direction != "~":
        return True
    if any(x > 1 for x in usable) and any(x < 1 for x in usable):
        return True
    return 1 / cfg.min_ratio < conf.lo and conf.hi < cfg.min_ratio


def run(ratios: np.ndarray, suspected: Direction, rule: Rule, cfg: AnalysisConfig
        ) -> tuple[int, Direction, bool]:
    done: list[Round] = []
    for k, x in enumerate(ratios, 1):
        if rule(decide_rounds(done, suspected, cfg), cfg):
            break
        done.append(Round(k, 0.01, 0.01 * float(x)))
    found = decide_rounds(done, suspected, cfg)
    return len(done), found.direction, bool(unsettled(found, cfg))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="50 runs per case")
    args = ap.parse_args()
    if args.quick:
        args.runs = 50
    cfg = AnalysisConfig()
    most = 6
    rng = np.random.default_rng(args.seed)
    print(f"min_ratio {cfg.min_ratio}, {cfg.round_confidence:.0%} interval, at most {most} "
          f"rounds, {args.runs} runs per case\n")
    print(f"{'true ratio':>10} {'sd':>5} {'asked':>6} | {'rounds: band':>12} "
          f"{'sequential':>10} | {'slower: band':>12} {'sequential':>10} | {'open':>6}")
    for true, sd, suspected in ((1.0, 0.03, "~"), (1.0, 0.06, "~"), (1.0, 0.10, "~"),
                                (0.94, 0.03, "~"), (0.94, 0.06, "~"), (1.04, 0.03, "~"),
                                (1.0, 0.06, "slower"), (1.05, 0.06, "slower"),
                                (1.15, 0.06, "slower"), (1.3, 0.06, "slower"),
                                (1.3, 0.10, "~")):
        draws = np.exp(rng.normal(np.log(true), sd, size=(args.runs, most)))
        stats = {}
        for name, rule in (("band", band_settled), ("seq", settled)):
            out = [run(d, suspected, rule, cfg) for d in draws]  # type: ignore[arg-type]
            stats[name] = (np.mean([n for n, _, _ in out]),
                           np.mean([d == "slower" for _, d, _ in out]),
                           np.mean([o for _, _, o in out]))
        print(f"{true:>10.2f} {sd:>5.2f} {suspected:>6} | {stats['band'][0]:>12.2f} "
              f"{stats['seq'][0]:>10.2f} | {stats['band'][1]:>12.1%} {stats['seq'][1]:>10.1%}"
              f" | {stats['seq'][2]:>6.1%}")


if __name__ == "__main__":
    main()
