"""Cell overhead: one cell through harness vs a bare `docker run` of the same work.

Alternates, per round: (A) `docker run --rm` of the base image running the scenario's
steps in a plain loop, (B) `python -m harness sweep` of a one-cell matrix with the same
scenario, image and iteration count. Prints wall times and B - A; the goal is <= 0.5 s
extra. Also prints the cell's own time (B's result.json `cell_s`), which leaves out the
harness's Python start-up and imports, and how long `harness --help` takes (goal < 0.3 s).

    python benchmarks/cell_overhead.py [--rounds 5] [--iterations 2000] [--image TAG]
        [--quick]     (--quick: one round of 50 iterations: CI's smoke run)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCENARIO = '''
def setup(params):
    return {"n": 0}
def step(state):
    s = 0
    for i in range(2000):
        s += i
    state["n"] += 1
'''
BARE = '''
import sys
sys.path.insert(0, "/s")
import scen
state = scen.setup({})
for _ in range(int(sys.argv[1])):
    scen.step(state)
'''


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iterations", type=int, default=2000)
    p.add_argument("--image", default="harness-test/base:bookworm")
    p.add_argument("--quick", action="store_true", help="one round of 50 iterations")
    a = p.parse_args()
    if a.quick:
        a.rounds, a.iterations = 1, 50
    with tempfile.TemporaryDirectory() as d:
        wd = Path(d)
        (wd / "scen.py").write_text(SCENARIO)
        (wd / "bare.py").write_text(BARE)
        (wd / "m.yaml").write_text(
            f"name: overhead\nruntime: docker\ndefaults: {{iterations: {a.iterations}, "
            f"warmup: 0, sample_every: 10}}\nmatrix:\n  image: [{a.image}]\n  gpu: [none]\n"
            f"  scenario: [scen.py]\n")
        bare_s, harness_s, cell_s, help_s = [], [], [], []
        for _ in range(a.rounds):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "harness", "--help"], check=True,
                           stdout=subprocess.DEVNULL)
            help_s.append(time.perf_counter() - t)
            t = time.perf_counter()
            subprocess.run(["docker", "run", "--rm", "--network", "none", "-v",
                            f"{wd}:/s:ro", a.image, "python3", "/s/bare.py",
                            str(a.iterations)], check=True)
            bare_s.append(time.perf_counter() - t)
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "harness", "sweep", str(wd / "m.yaml"),
                            "--out", str(wd / "out"), "-q"], check=True,
                           stdout=subprocess.DEVNULL)
            harness_s.append(time.perf_counter() - t)
            newest = sorted((wd / "out" / "overhead").glob("*"))[-1]
            res = json.loads((newest / "results.json").read_text())
            cell = next(iter(res["cells"].values()))
            cell_s.append(cell["timings"]["cell_s"])
        b, h, c, hp = (statistics.median(x) for x in (bare_s, harness_s, cell_s, help_s))
        print(f"cell overhead, {a.iterations} iterations, image {a.image}, "
              f"{a.rounds} alternating rounds (medians)\n")
        print("| what | seconds | extra vs bare docker run |")
        print("|---|---|---|")
        print(f"| bare `docker run --rm` | {b:.3f} | - |")
        print(f"| `python -m harness sweep` (whole CLI) | {h:.3f} | {h - b:+.3f} "
              f"({'met' if h - b <= 0.5 else 'missed'}: goal <= 0.5 s) |")
        print(f"| the cell inside harness (cell_s) | {c:.3f} | {c - b:+.3f} |")
        print(f"| `python -m harness --help` | {hp:.3f} | "
              f"({'met' if hp < 0.3 else 'missed'}: goal < 0.3 s) |")


if __name__ == "__main__":
    main()
