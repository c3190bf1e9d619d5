"""Attribution's cost and accuracy (issue 23): each --attribute kind vs none, side by side.

Overhead: for each step (pure Python, numpy, allocating), fresh subprocesses of the same
interpreter run the measured loop the agent runs (measure_start, step, at_sample every 10
steps, measure_end) with no attribution and with each kind, in alternating order, for
--rounds rounds. Printed: the median step time per kind and the median over rounds of
its ratio to "none". Goal: stack <= 1.05.

Accuracy: a step keeping one bytearray(N) per call at a known line; the bytes per call
that heap (and native, where memray is importable) name for that line vs the truth,
sys.getsizeof(bytearray(N)) + the list's pointer slot (8 bytes).

    python benchmarks/attribution_overhead.py [--steps 300] [--rounds 5] [--python PY]
        [--quick]     (--quick: 10 steps, one round: CI's smoke run, seconds)
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

DRIVER_DIR = Path(__file__).resolve().parent.parent / "harness" / "agent"

STEPS = {
    "python": '''
def setup(params):
    return None
def step(state):
    s = 0
    for i in range(25000):
        s += i
''',
    "numpy": '''
import numpy as np
def setup(params):
    return np.random.default_rng(0).random(1 << 16)
def step(x):
    np.fft.rfft(x).real.sum()
    (x[:256, None] * x[None, :256]).sum()
''',
    "alloc": '''
def setup(params):
    return None
def step(state):
    rows = [{"i": i, "s": str(i)} for i in range(1500)]
    del rows
''',
}

GROW = '''
def setup(params):
    return []
def step(keep):
    keep.append(bytearray(%d))  # SITE
'''

# The measured loop, run in a fresh interpreter: prints step times and the record.
RUNNER = r'''
import importlib.util, json, sys, time
sys.path.insert(0, sys.argv[1])
scenario, kinds, steps = sys.argv[2], sys.argv[3], int(sys.argv[4])
spec = importlib.util.spec_from_file_location("scenario", scenario)
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
state = m.setup({})
for _ in range(30):
    m.step(state)
where = None
if kinds != "none":
    import attribution
    where = attribution.make(kinds.split(","), scenario)
done = [0]
if where is not None:
    where.measure_start(steps, lambda: done[0])
clock = time.perf_counter
dts = []
while done[0] < steps:
    t1 = clock()
    m.step(state)
    dts.append(clock() - t1)
    done[0] += 1
    if where is not None and done[0] % 10 == 0:
        where.at_sample(done[0])
record = where.measure_end(done[0]) if where is not None else None
print(json.dumps({"dts": dts, "where": record}))
'''


def run_once(python: str, runner: Path, scenario: Path, kinds: str, steps: int) -> dict:  # type: ignore[type-arg]
    out = subprocess.run([python, str(runner), str(DRIVER_DIR), str(scenario), kinds, str(steps)],
                         capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"{kinds} on {scenario.name} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def importable(python: str, name: str) -> bool:
    return subprocess.run([python, "-c", f"import {name}"], capture_output=True).returncode == 0


def overhead(python: str, tmp: Path, runner: Path, kinds: list[str], steps: int,
             rounds: int) -> None:
    print(f"overhead: median step time and median ratio to no attribution, {rounds} rounds "
          f"x {steps} steps, {python}")
    print(f"{'step':8} {'kind':7} {'median step':>12} {'ratio':>7}  per-round ratios")
    for name, source in STEPS.items():
        if name == "numpy" and not importable(python, "numpy"):
            print(f"{name:8} (numpy is not importable by {python}: skipped)")
            continue
        scenario = tmp / f"step_{name}.py"
        scenario.write_text(source)
        medians: dict[str, list[float]] = {k: [] for k in ["none", *kinds]}
        for r in range(rounds):
            order = ["none", *kinds]
            if r % 2:
                order.reverse()
            for kind in order:
                dts = run_once(python, runner, scenario, kind, steps)["dts"]
                medians[kind].append(statistics.median(dts))
        base = medians["none"]
        for kind in ["none", *kinds]:
            ratios = [m / b for m, b in zip(medians[kind], base, strict=True)]
            print(f"{name:8} {kind:7} {statistics.median(medians[kind]) * 1e6:10.1f}us "
                  f"{statistics.median(ratios):7.3f}  " + " ".join(f"{x:.3f}" for x in ratios))


def accuracy(python: str, tmp: Path, runner: Path, kinds: list[str], steps: int) -> None:
    print("\naccuracy: bytes/call named at the known line vs truth "
          "(sys.getsizeof(bytearray(N)) + 8 for the list slot)")
    probe = subprocess.run([python, "-c", "import sys; print(*[sys.getsizeof(bytearray(n)) "
                            "for n in (100, 1000, 10000, 100000)])"],
                           capture_output=True, text=True, check=True).stdout.split()
    for n, size in zip((100, 1000, 10000, 100000), probe, strict=True):
        truth = int(size) + 8
        scenario = tmp / f"grow_{n}.py"
        scenario.write_text(GROW % n)
        line = next(i for i, t in enumerate((GROW % n).splitlines(), 1) if "SITE" in t)
        for kind in kinds:
            rec = run_once(python, runner, scenario, kind, steps)["where"]
            part = rec.get(kind, {})
            named = sum(s["size"] for s in part.get("sites", ())
                        if [str(scenario), line] in [f[:2] for f in s["frames"]])
            per_call = named / rec["calls"]
            print(f"N={n:<7} {kind:7} named {per_call:10.1f} B/call  truth {truth:7d}  "
                  f"ratio {per_call / truth:.4f}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--quick", action="store_true", help="10 steps, one round (seconds)")
    args = p.parse_args()
    if args.quick:
        args.steps, args.rounds = 10, 1
    kinds = ["heap", "stack"] + (["native"] if importable(args.python, "memray") else [])
    if "native" not in kinds:
        print(f"(memray is not importable by {args.python}: native left out)")
    print("(ops and device need TF1 sessions or torch: see tests/integration/test_attribution_*)")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        runner = tmp / "runner.py"
        runner.write_text(RUNNER)
        overhead(args.python, tmp, runner, kinds, args.steps, args.rounds)
        accuracy(args.python, tmp, runner, [k for k in kinds if k != "stack"], args.steps)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
