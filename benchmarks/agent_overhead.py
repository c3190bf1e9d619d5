"""Agent overhead: a ~1 ms step under the agent vs the same step in a bare loop.

Runs A (bare) and B (agent) alternately in fresh subprocesses of the same interpreter
and prints, per round and as medians, the wall time of the measured iterations and
the ratio B/A. Goal: <= 1 % overhead (ratio <= 1.01). Two step kinds: a fixed 1 ms
busy-wait (overhead = the agent's sampling cost per step) and fixed CPU work (also
shows any perturbation of the step itself).

    python benchmarks/agent_overhead.py [--iterations 2000] [--rounds 5]
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

AGENT = Path(__file__).resolve().parent.parent / "harness" / "agent" / "agent.py"
SCENARIO = '''
import time
def setup(params):
    return params.get("kind", "busy")
def work():
    s = 0
    for i in range(25000):
        s += i
    return s
def step(kind):
    if kind == "busy":
        t = time.perf_counter()
        while time.perf_counter() - t < 0.001:
            pass
    else:
        work()
'''
BARE = SCENARIO + '''
import sys, time
kind, n = sys.argv[1], int(sys.argv[2])
state = setup({"kind": kind})
for _ in range(50):
    step(state)
t0 = time.perf_counter()
for _ in range(n):
    step(state)
print(time.perf_counter() - t0)
'''


def _env(pythonmalloc: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONMALLOC"}
    if pythonmalloc:
        env["PYTHONMALLOC"] = "malloc"
    return env


def bare(kind: str, n: int, workdir: Path, pythonmalloc: bool = True) -> float:
    out = subprocess.run([sys.executable, str(workdir / "bare.py"), kind, str(n)],
                         capture_output=True, text=True, check=True, env=_env(pythonmalloc))
    return float(out.stdout.strip())


def agent(kind: str, n: int, workdir: Path, every: int, pythonmalloc: bool = True) -> float:
    out = workdir / "samples.jsonl"
    out.unlink(missing_ok=True)
    env = _env(pythonmalloc)
    subprocess.run([sys.executable, str(AGENT), "--scenario", str(workdir / "scen.py"),
                    "--params", json.dumps({"kind": kind}), "--iterations", str(n),
                    "--warmup", "50", "--sample-every", str(every), "--out", str(out),
                    "--quiet", "--no-gpu"], check=True, env=env)
    end = json.loads(out.read_text().splitlines()[-1])
    return float(end["phases"]["measure"])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--iterations", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--sample-every", type=int, default=10)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        wd = Path(d)
        (wd / "scen.py").write_text(SCENARIO)
        (wd / "bare.py").write_text(BARE)
        print(f"agent overhead, {a.iterations} steps, sample every {a.sample_every}, "
              f"{a.rounds} alternating rounds, {sys.version.split()[0]}\n")
        print("Both sides run with the same allocator (PYTHONMALLOC=malloc, the harness "
              "default, or pymalloc).\n")
        print("| step | allocator | bare s (median) | agent s (median) | ratio agent/bare "
              "| goal <= 1.01 |")
        print("|---|---|---|---|---|---|")
        for kind in ("busy", "work"):
            for pm in (True, False):
                ratios, bs, ags = [], [], []
                for _ in range(a.rounds):
                    b = bare(kind, a.iterations, wd, pm)
                    g = agent(kind, a.iterations, wd, a.sample_every, pm)
                    bs.append(b)
                    ags.append(g)
                    ratios.append(g / b)
                r = statistics.median(ratios)
                label = "1 ms busy-wait" if kind == "busy" else "fixed CPU work"
                print(f"| {label} | {'malloc' if pm else 'pymalloc'} | "
                      f"{statistics.median(bs):.4f} | {statistics.median(ags):.4f} | "
                      f"{r:.4f} | {'met' if r <= 1.01 else 'missed'} |")
    print(f"\n(took {time.process_time():.1f} s CPU in this process)")


if __name__ == "__main__":
    main()
