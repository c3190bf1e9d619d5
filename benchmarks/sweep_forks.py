"""What a local sweep's runs cost in CPU: each a fresh interpreter, or each a fork of a warm
interpreter of its environment (harness/agent/forkserver.py), side by side in one run.

A matrix of one image (this interpreter) and `--cells` scenarios of a step of a few
microseconds, `--iterations` calls each: one measured run a cell, no rows to compare, so
no rounds, and every tree runs the same runs. `harness sweep` of it runs in a child
process whose CPU time (its own and every process it waited for: the servers, their
forks, the fresh interpreters) is read from wait4(2); trees alternate, `--rounds`
times. A fresh interpreter's start here: `python3 -c pass` is timed the same way.

With `--base REV` that commit's tree (`git archive`) is measured too, alternating with
this one: the table has a column each, and the CPU ratio this / base.

    python benchmarks/sweep_forks.py [--rounds 5] [--cells 12] [--iterations 300]
        [--base REV]
        [--quick]     (--quick: one round of 2 cells, this tree alone: CI's smoke run)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SCENARIO = '''
def setup(params):
    return {"n": 0}


def step(state):
    state["n"] = sum(range(200))
'''


def cpu_of(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int]:
    """(CPU-s of `argv` and the processes it waited for, wall s, exit code)."""
    t = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, time.perf_counter() - t, proc.returncode


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--cells", type=int, default=12)
    p.add_argument("--iterations", type=int, default=300)
    p.add_argument("--base", metavar="REV", help="also measure this commit's tree")
    p.add_argument("--quick", action="store_true", help="one round of 2 cells")
    a = p.parse_args()
    if a.quick:
        a.rounds, a.cells, a.base = 1, 2, None
    with tempfile.TemporaryDirectory() as d:
        wd = Path(d)
        trees: list[tuple[str, Path]] = [("this tree", REPO)]
        if a.base:
            base = wd / "base"
            base.mkdir()
            archive = subprocess.run(["git", "-C", str(REPO), "archive", a.base],
                                     check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
            trees.insert(0, (f"base {a.base}", base))
        names = [f"s{i}.py" for i in range(a.cells)]
        for name in names:
            (wd / name).write_text(SCENARIO, encoding="utf-8")
        (wd / "m.yaml").write_text(
            f"name: forks\nruntime: local\ndefaults: {{iterations: {a.iterations}, "
            f"warmup: 10, sample_every: 10, timeout: 5m}}\nmatrix:\n"
            f"  image: [{sys.executable}]\n  scenario: [{', '.join(names)}]\n",
            encoding="utf-8")
        cpu: dict[str, list[float]] = {n: [] for n, _ in trees}
        wall: dict[str, list[float]] = {n: [] for n, _ in trees}
        start: list[float] = []
        for r in range(a.rounds):
            start.append(cpu_of([sys.executable, "-c", "pass"], dict(os.environ), wd)[0])
            for name, tree in trees:
                env = {**os.environ, "PYTHONPATH": str(tree)}
                used, took, code = cpu_of(
                    [sys.executable, "-m", "harness", "sweep", "m.yaml", "-q", "--out",
                     str(wd / "out" / f"{r}-{len(cpu[name])}")], env, wd)
                # 0: every cell ok; 4: a step of microseconds read undecided by a busy host
                assert code in (0, 4), f"{name}: harness sweep exited {code}"
                cpu[name].append(used)
                wall[name].append(took)
        med = statistics.median
        print(f"{a.cells} cells of {a.iterations} calls, {a.rounds} round(s); "
              f"`python3 -c pass`: {med(start):.3f} CPU-s (median)")
        print("| tree | sweep CPU-s (median) | per cell | wall s |")
        print("|---|---|---|---|")
        for name, _ in trees:
            print(f"| {name} | {med(cpu[name]):.2f} | {med(cpu[name]) / a.cells:.3f} | "
                  f"{med(wall[name]):.2f} |")
        if len(trees) == 2:
            (b, _), (t, _) = trees
            each = ", ".join(f"{x / y:.2f}" for x, y in zip(cpu[t], cpu[b], strict=True))
            print(f"CPU this / base: {med(cpu[t]) / med(cpu[b]):.2f}x (per round: {each})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
