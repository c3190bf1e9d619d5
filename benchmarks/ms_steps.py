"""Marked tests whose calls take milliseconds: the verdict and what a check costs beyond
its budget (issue 62 point 2), this checkout beside another (`--before ROOT`).

A call of a millisecond spends its warm-up's 200 calls in 0.2-1 s: before this
benchmark, that warm-up ran before the budget, so a test marked `budget="0.5s"` cost up to
twice it. The cases are steps written here (not upstream reports), each a spin of a
few ms (CPU work) with or without memory kept, so the truth is known by construction and
measured by hand with `--truth` (a plain loop of 600 calls under tracemalloc: the bytes
kept per call over the last third and over the first, and the median call time of
the first and last 100 calls), not by harness:

- flat_1ms, flat_3ms: nothing kept, the same time each call: `ok`;
- leak_1k_1ms, leak_16k_2ms: 1 KiB / 16 KiB kept every call: `leak`;
- fill_64k_3ms: 64 KiB kept by each of the first 80 calls (5 MiB), then nothing (a
  cache that fills and holds): not `leak`; with a short warm-up most of it fills in
  the measured calls;
- fill_8k_2ms: 8 KiB by each of the first 300 calls (2.3 MiB), then nothing: not
  `leak`;
- first_slow_2ms: the first 100 calls take 6 ms, the rest 2 ms (a JIT, a cache of
  compiled code): not `slowdown`;
- slower_2ms: each call 0.01 ms longer than the one before (1 ms -> 4 ms over 300
  calls): `slowdown`.

Each checkout runs in a worker process of its own, which checks each case in turn,
`--reps` times, the two checkouts alternated case by case so the machine's load falls
on both. Per case and checkout: the verdicts and the wall time beyond the budget
(median, max).

Run: PYTHONPATH=. python benchmarks/ms_steps.py [--reps 3] [--budget 0.5s]
     [--before ROOT] [--truth] [--quick]
`--quick` (CI): 1 rep of flat_1ms and leak_16k_2ms, this checkout only.
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
sys.path.insert(0, str(ROOT))

from harness.matrixfile.entries import parse_duration  # noqa: E402

STEPS = '''import time

KEPT = []
N = [0]


def _spin(seconds):
    t = time.perf_counter()
    while time.perf_counter() - t < seconds:
        pass


def _call():
    N[0] += 1
    return N[0]


def flat_1ms():
    _spin(0.001)


def flat_3ms():
    _spin(0.003)


def leak_1k_1ms():
    _spin(0.001)
    KEPT.append(bytearray(1024))


def leak_16k_2ms():
    _spin(0.002)
    KEPT.append(bytearray(16384))


def fill_64k_3ms():
    _spin(0.003)
    if _call() <= 80:
        KEPT.append(bytearray(65536))


def fill_8k_2ms():
    _spin(0.002)
    if _call() <= 300:
        KEPT.append(bytearray(8192))


def first_slow_2ms():
    _spin(0.006 if _call() <= 100 else 0.002)


def slower_2ms():
    _spin(0.001 + 0.00001 * min(_call(), 300))
'''

# name: what is right (a verdict, or "not <verdict>")
CASES = {
    "flat_1ms": "ok", "flat_3ms": "ok", "leak_1k_1ms": "leak", "leak_16k_2ms": "leak",
    "fill_64k_3ms": "not leak", "fill_8k_2ms": "not leak",
    "first_slow_2ms": "not slowdown", "slower_2ms": "slowdown",
}
QUICK = ("flat_1ms", "leak_16k_2ms")

# Each case is a module of its own (its KEPT and call count start afresh in each
# check's child, forked from the worker's warm interpreter before any call).
WORKER = '''import json, sys, time
import harness
import ms_steps

budget = sys.argv[1]
harness.check(ms_steps.flat_1ms, budget="0.1s")     # the warm server starts
print("ready", flush=True)
for line in sys.stdin:
    fn = getattr(ms_steps, line.strip())
    t0 = time.perf_counter()
    got = harness.check(fn, budget=budget)
    wall = time.perf_counter() - t0
    print(json.dumps({"wall": wall, "verdict": got.verdict,
                      "attempts": len(got.result.attempts),
                      "said": str(got)}), flush=True)
'''

TRUTH = '''import gc, statistics, sys, time, tracemalloc
import ms_steps

fn = getattr(ms_steps, sys.argv[1])
tracemalloc.start()
kept, times = [0] * 60, [0.0] * 600
for i in range(600):
    t = time.perf_counter()
    fn()
    times[i] = time.perf_counter() - t
    if i % 10 == 9:
        gc.collect()
        kept[i // 10] = tracemalloc.get_traced_memory()[0]
per = lambda a, b: (kept[b] - kept[a]) / ((b - a) * 10)
print(json.dumps({"first_third": per(0, 19), "last_third": per(40, 59),
                  "first_ms": statistics.median(times[:100]) * 1e3,
                  "last_ms": statistics.median(times[-100:]) * 1e3}))
'''.replace("import gc,", "import json, gc,")


def _env(root: Path, step_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(step_dir)])
    return env


def worker(root: Path, step_dir: Path, budget: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", WORKER, budget], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=_env(root, step_dir),
                            cwd=step_dir)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "ready":
        raise SystemExit(f"ms_steps: the worker of {root} did not start: {line!r}")
    return proc


def ask(proc: subprocess.Popen[str], case: str) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(case + "\n")
    proc.stdin.flush()
    got: dict[str, Any] = json.loads(proc.stdout.readline())
    return got


def right(verdict: str, want: str) -> bool:
    return verdict != want[4:] if want.startswith("not ") else verdict == want


def truth(step_dir: Path, cases: list[str]) -> None:
    print("| case | kept per call, first third | last third | call, first 100 | "
          "last 100 |\n|---|---|---|---|---|")
    for case in cases:
        out = subprocess.run([sys.executable, "-c", TRUTH, case], capture_output=True,
                             text=True, check=True, env=_env(ROOT, step_dir), cwd=step_dir)
        t = json.loads(out.stdout)
        print(f"| {case} | {t['first_third']:,.0f} B | {t['last_third']:,.0f} B | "
              f"{t['first_ms']:.2f} ms | {t['last_ms']:.2f} ms |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--budget", default="0.5s")
    p.add_argument("--before", metavar="ROOT", type=Path, default=None,
                   help="another checkout (main), its checks alternated with this one's")
    p.add_argument("--case", action="append", choices=sorted(CASES), default=None)
    p.add_argument("--truth", action="store_true",
                   help="measure each case by hand (tracemalloc, a plain loop) only")
    p.add_argument("--quick", action="store_true",
                   help=f"smoke run (CI): 1 rep of {', '.join(QUICK)}, this checkout")
    args = p.parse_args(argv)
    cases = args.case or (list(QUICK) if args.quick else list(CASES))
    if args.quick:
        args.reps, args.before = 1, None
    roots = {"after": ROOT} if args.before is None else {
        "before": args.before.resolve(), "after": ROOT}
    with tempfile.TemporaryDirectory(prefix="ms-steps-") as tmp:
        step_dir = Path(tmp)
        (step_dir / "ms_steps.py").write_text(STEPS)
        if args.truth:
            truth(step_dir, cases)
            return 0
        procs = {name: worker(root, step_dir, args.budget) for name, root in roots.items()}
        rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
        try:
            for _ in range(args.reps):
                for case in cases:
                    for name, proc in procs.items():
                        rows.setdefault((case, name), []).append(ask(proc, case))
                        print(".", end="", file=sys.stderr, flush=True)
        finally:
            for proc in procs.values():
                assert proc.stdin is not None
                proc.stdin.close()
                proc.wait(timeout=60)
    budget_s = parse_duration(args.budget)
    if budget_s is None:
        raise SystemExit(f"ms_steps: --budget {args.budget!r} is not a duration")
    print(f"\nharness.check, budget {args.budget}, {args.reps} checks of each case and "
          f"checkout, alternated; load {os.getloadavg()[0]:.1f}.\n")
    print("| case | right | code | verdicts | right | beyond the budget: median, max | "
          "attempts |\n|---|---|---|---|---|---|---|")
    totals: dict[str, list[float]] = {}
    for (case, name), got in rows.items():
        verdicts: dict[str, int] = {}
        for r in got:
            verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
        beyond = [r["wall"] - budget_s for r in got]
        totals.setdefault(name, []).extend(beyond)
        print(f"| {case} | {CASES[case]} | {name} | "
              f"{', '.join(f'{v} {n}' for v, n in sorted(verdicts.items()))} | "
              f"{sum(right(r['verdict'], CASES[case]) for r in got)}/{len(got)} | "
              f"{statistics.median(beyond):+.2f}, {max(beyond):+.2f} s | "
              f"{max(r['attempts'] for r in got)} |")
    for name, beyond in totals.items():
        print(f"{name}: beyond the budget, all cases: mean {statistics.mean(beyond):+.3f} s, "
              f"median {statistics.median(beyond):+.3f} s")
    for (case, name), got in rows.items():
        for r in got:
            if not right(r["verdict"], CASES[case]):
                print(f"{name} {case}: {r['said'][:300]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
