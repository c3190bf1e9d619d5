"""Every recorded run re-decided by this harness beside another checkout's (issue 41).

For each results directory given (default: the repository's, tests/data/h100/*) every
cell is decided again from its samples.jsonl (`reanalyze`, the path of
`harness report DIR --reanalyze`), and every series of tests/data/recorded by the
within-run verdict; with `--old TREE` (a checkout of another commit, e.g. `git worktree
add` of main) the same is done by that tree's code in a subprocess, side by side, and
every verdict that differs is printed with both reasons.

Run: python benchmarks/redecide.py [--old TREE] [--quick] [DIR ...]
     (--quick: the repository's directories only, which is also the default)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ("tests/data/h100/explain-1123", "tests/data/h100/gpu-live",
        "tests/data/h100/gpu-real", "tests/data/h100/sweep-1123")
SERIES = ROOT / "tests" / "data" / "recorded"


def decide_all(dirs: list[Path]) -> dict[str, tuple[str, str]]:
    """(verdict, reason) by "dir:cell", with this interpreter's `harness`."""
    from harness.analysis.decision import within_run
    from harness.protocol.ingest import read_samples
    from harness.reanalyze import reanalyze
    from harness.runtimes.base import RunOutcome
    from harness.store import SeriesCache
    from harness.store.gate import read_run
    from harness.thresholds import AnalysisConfig

    out: dict[str, tuple[str, str]] = {}
    for d in dirs:
        results, _ = reanalyze(read_run(d).results, SeriesCache(d), AnalysisConfig())
        for cid, res in sorted(results.items()):
            out[f"{d.name}:{cid}"] = (str(res.verdict), res.reason)
    for path in sorted(SERIES.glob("*.jsonl")):
        oom = "oom" in path.name
        outcome = RunOutcome(exit_code=137, oom_killed=True, mem_limit_bytes=2 << 30) \
            if oom else RunOutcome(exit_code=0)
        v = within_run(read_samples(path), outcome, AnalysisConfig())
        out[f"recorded:{path.stem}"] = (str(v.verdict), v.reason)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dirs", nargs="*", type=Path)
    p.add_argument("--old", type=Path, help="a checkout of the harness to compare with")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    dirs = [d.resolve() for d in args.dirs] or [ROOT / r for r in RUNS]
    if args.json:
        sys.path.insert(0, os.environ["HARNESS_TREE"])
        print(json.dumps(decide_all(dirs)))
        return 0
    sys.path.insert(0, str(ROOT))
    new = decide_all(dirs)
    if args.old is None:
        for key, (verdict, reason) in new.items():
            print(f"{key}: {verdict} ({reason})")
        return 0
    env = {**os.environ, "HARNESS_TREE": str(args.old.resolve()),
           "PYTHONPATH": str(args.old.resolve())}
    got = subprocess.run([sys.executable, __file__, "--json", *map(str, dirs)], env=env,
                         capture_output=True, text=True, check=True, cwd=args.old)
    old: dict[str, list[str]] = json.loads(got.stdout)
    changed = [k for k in new if k in old and old[k][0] != new[k][0]]
    reasons = [k for k in new if k in old and old[k][0] == new[k][0] and old[k][1] != new[k][1]]
    print(f"{len(new)} cells and series re-decided; {len(changed)} verdicts changed, "
          f"{len(reasons)} reasons changed beside the same verdict\n")
    print("| cell | old | new | new reason |\n|---|---|---|---|")
    for k in changed + reasons:
        print(f"| {k} | {old[k][0]} | {new[k][0]} | {new[k][1]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
