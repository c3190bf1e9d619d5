"""The one memory decision's property (issue 41) over many more generated series than CI's
test: live-at-k == fixed-k on the same samples, and no verdict contradicting its figures
(tests/unit/analysis/test_one_decision.py's `check`, on tests/unit/analysis/seriesgen's
series: linear leaks, saturating and linear fills that stop, sawtooth, steps, at the
recorded runs' noise levels; simulated). Prints, per shape, how the live look and the
verdict of all the samples read.

Run: python benchmarks/one_decision.py [--examples 400] [--quick]
     (--quick: 3 examples, CI's smoke run: tests/unit/analysis/test_one_decision.py
     holds the property over 40)
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "unit" / "analysis")]

from hypothesis import given, settings  # noqa: E402
from seriesgen import Shape, shapes  # noqa: E402
from test_one_decision import CFG, OK, check, series_of  # noqa: E402

from harness.analysis.decision import CellFacts, decide  # noqa: E402
from harness.analysis.sequential import LiveDecider  # noqa: E402
from harness.protocol.ingest import Record  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=400)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    n = 3 if args.quick else args.examples
    seen: collections.Counter[tuple[str, str, str]] = collections.Counter()
    t0 = time.perf_counter()

    @settings(max_examples=n, deadline=None, derandomize=True, database=None)
    @given(shapes(calls=(80, 2000)))
    def run(shape: Shape) -> None:
        check(shape)                   # raises where the property fails
        decider = LiveDecider(CFG, 40, 10**6)
        live = next((got for s in shape.samples()
                     if (got := decider.feed(Record("sample", 0, s))) is not None), None)
        fixed = decide(CellFacts(CFG, series_of(shape.samples(), True), OK)).verdict
        seen[(shape.shape, live.verdict if live else "undecided", str(fixed))] += 1

    run()
    print(f"{n} generated series (simulated), property held on every one "
          f"({time.perf_counter() - t0:.0f} s)\n")
    print("| shape | live look | verdict of all samples | series |\n|---|---|---|---|")
    for (shape, live, fixed), count in sorted(seen.items()):
        print(f"| {shape} | {live} | {fixed} | {count} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
