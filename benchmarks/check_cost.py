"""What one `harness.check` of a trivial step costs beyond its measured calls (issue 62):
the fixed cost a marked test pays on top of its budget.

Each checkout runs in a worker process of its own (this one's harness and, with
`--before ROOT`, another checkout's), which checks a trivial step once to start its
warm fork server, then once per line it is sent: the two are asked in turn, so the
machine's load falls on both alike. Per check, from `Checked.result.timings`:

- wall: the `harness.check` call, as its caller waits for it;
- measured: the agent's warm-up and measured phases (what the budget buys);
- fixed: wall - measured;
- child: the run's process beyond its phases (fork, the agent's start, its end and
  exit: `timings.run_s` less the phases);
- host: wall - run_s (the matrix, the store, the live watcher, the decision).

`--quick` (CI): 3 checks of this checkout, budget 0.2 s.

Run: PYTHONPATH=. python benchmarks/check_cost.py [--checks 20] [--budget 0.5s]
     [--before ROOT] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

STEP = '''def trivial():
    sum(range(100))
'''

WORKER = '''import json, sys, time
import harness
from trivial_step import trivial

budget = sys.argv[1]
harness.check(trivial, budget=budget)       # the warm server starts
print("ready", flush=True)
for _ in sys.stdin:
    t0 = time.perf_counter()
    got = harness.check(trivial, budget=budget)
    wall = time.perf_counter() - t0
    t = got.result.timings
    phases = (t.import_s or 0) + (t.setup_s or 0) + (t.warmup_s or 0) + (t.measure_s or 0)
    measured = (t.warmup_s or 0) + (t.measure_s or 0)
    print(json.dumps({"wall": wall, "measured": measured, "run": t.run_s,
                      "child": t.run_s - phases - (t.teardown_s or 0),
                      "verdict": got.verdict, "said": "" if got.ok else str(got),
                      "attempts": len(got.result.attempts)}), flush=True)
'''

FIELDS = ("wall", "measured", "fixed", "child", "host")


def worker(root: Path, step_dir: Path, budget: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(step_dir)])
    proc = subprocess.Popen([sys.executable, "-c", WORKER, budget], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env, cwd=step_dir)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "ready":
        raise SystemExit(f"check_cost: the worker of {root} did not start: {line!r}")
    return proc


def ask(proc: subprocess.Popen[str]) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    got: dict[str, Any] = json.loads(proc.stdout.readline())
    got["fixed"] = got["wall"] - got["measured"]
    got["host"] = got["wall"] - got["run"]
    return got


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--checks", type=int, default=20)
    p.add_argument("--budget", default="0.5s")
    p.add_argument("--before", metavar="ROOT", type=Path, default=None,
                   help="another checkout (main), its checks alternated with this one's")
    p.add_argument("--quick", action="store_true",
                   help="smoke run (CI): 3 checks, budget 0.2 s")
    args = p.parse_args(argv)
    if args.quick:
        args.checks, args.budget = 3, "0.2s"
    roots = {"after": ROOT} if args.before is None else {
        "before": args.before.resolve(), "after": ROOT}
    with tempfile.TemporaryDirectory(prefix="check-cost-") as tmp:
        step_dir = Path(tmp)
        (step_dir / "trivial_step.py").write_text(STEP)
        procs = {name: worker(root, step_dir, args.budget) for name, root in roots.items()}
        rows: dict[str, list[dict[str, Any]]] = {name: [] for name in procs}
        try:
            for _ in range(args.checks):
                for name, proc in procs.items():
                    rows[name].append(ask(proc))
        finally:
            for proc in procs.values():
                assert proc.stdin is not None
                proc.stdin.close()
                proc.wait(timeout=60)
    print(f"harness.check of a trivial step, budget {args.budget}, {args.checks} checks "
          f"each, alternated; load {os.getloadavg()[0]:.1f}. Median (min..max), s:\n")
    print("| code | " + " | ".join(FIELDS) + " | verdicts |")
    print("|---" * (len(FIELDS) + 2) + "|")
    for name, got in rows.items():
        cells = [f"{statistics.median(r[f] for r in got):.3f} "
                 f"({min(r[f] for r in got):.3f}..{max(r[f] for r in got):.3f})"
                 for f in FIELDS]
        verdicts = [f"{v} {sum(r['verdict'] == v for r in got)}"
                    for v in sorted({str(r["verdict"]) for r in got})]
        print(f"| {name} | " + " | ".join(cells) + f" | {', '.join(verdicts)} |")
    for name, got in rows.items():
        for r in got:
            if r["said"]:
                print(f"{name}: {r['said']} ({r['attempts']} attempts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
