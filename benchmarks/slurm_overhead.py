"""Scheduling cost of `slurm:`: the same sweep with and without Slurm.

Runs one matrix three ways, each as `python -m harness sweep`: (A) as written (cells
one after another here), (B) with `slurm: {}` and `max-parallel: 1` (one job at a
time: the per-cell cost of submit, queue, job start and `_cell` start-up, undisturbed
by other cells), (C) with `slurm: {}` (every cell submitted at once; Slurm runs as many
as the node's CPUs/GPUs allow). Prints wall times and the mean cell time (`run_s`, from
submission to the outcome) per way. Needs a Slurm cluster (images/setup-slurm.sh).

    python benchmarks/slurm_overhead.py [--cells 8] [--iterations 200] [--matrix M.yaml]
        [--quick]     (--quick: 2 cells of 20 iterations: CI's smoke run)

With --matrix, that matrix (runtime local or docker, no slurm: block) is used instead
of the built-in one (N cells of a 1 ms step on this interpreter).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = '''
import time
def setup(params):
    return None
def step(state):
    time.sleep(0.001)
'''


def sweep(matrix: Path, out: Path, iterations: int | None) -> tuple[float, list[float], int]:
    argv = [sys.executable, "-m", "harness", "sweep", str(matrix), "--out", str(out), "-q"]
    if iterations:
        argv += ["--iterations", str(iterations)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    if done.returncode not in (0, 1):
        sys.exit(f"sweep failed ({done.returncode}): {done.stderr[-2000:]}")
    root = max(p for p in out.iterdir() if p.is_dir())
    root = max(root.iterdir())
    runs = [json.loads(p.read_text())["timings"]["run_s"]
            for p in sorted((root / "cells").glob("*/result.json"))]
    return wall, runs, done.returncode


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, default=8)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--matrix", type=Path)
    ap.add_argument("--quick", action="store_true", help="2 cells of 20 iterations")
    args = ap.parse_args()
    if args.quick:
        args.cells, args.iterations = 2, 20
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        if args.matrix:
            text = args.matrix.read_text()
            base = args.matrix.resolve().parent
            for p in base.rglob("*.py"):
                dest = tmp / p.relative_to(base)
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text(p.read_text())
        else:
            (tmp / "work.py").write_text(SCENARIO)
            scen = "\n".join(f"    - {{script: work.py, id: c{i}}}" for i in range(args.cells))
            text = (f"name: bench\nruntime: local\ndefaults: {{warmup: 20, timeout: 5m}}\n"
                    f"matrix:\n  image: [{sys.executable}]\n  scenario:\n{scen}\n")
        ways = {"A here": text, "B slurm, one job at a time":
                text + "\nslurm: {}\nmax-parallel: 1\n", "C slurm, all at once":
                text + "\nslurm: {}\n"}
        print(f"{'way':28} {'wall s':>7} {'cells':>5} {'mean run_s':>10} {'exit':>4}")
        rows = {}
        for i, (name, body) in enumerate(ways.items()):
            m = tmp / f"m{i}.yaml"
            m.write_text(body)
            wall, runs, rc = sweep(m, tmp / f"out{i}", args.iterations)
            rows[name] = (wall, runs)
            print(f"{name:28} {wall:7.2f} {len(runs):5d} {statistics.mean(runs):10.2f} {rc:4d}")
        a, b = rows["A here"], rows["B slurm, one job at a time"]
        print(f"\nper cell, Slurm one at a time vs here: "
              f"{(b[0] - a[0]) / len(a[1]):+.2f} s wall, "
              f"{statistics.mean(b[1]) - statistics.mean(a[1]):+.2f} s run_s")


if __name__ == "__main__":
    main()
