"""Agent overhead: a ~1 ms step under the agent vs the same step in a bare loop.

Runs A (bare) and B (agent) alternately in fresh subprocesses of the same interpreter
and prints, per round and as medians, the wall time of the measured iterations and
the ratio B/A. Goal: <= 1 % overhead (ratio <= 1.01). Two step kinds: a fixed 1 ms
busy-wait (overhead = the agent's sampling cost per step) and fixed CPU work (integer
additions, each result a new object from the allocator: also shows any perturbation of
the step itself).

Each with the heap modes side by side, in the environment a sweep gives the cell
(`RunRequest.environment`, PYTHONMALLOC=malloc in both): `heap: stock` and `heap: quiet`
(glibc's tcache off, `--heap quiet`: gc.collect() before each heap reading), the bare
loop in the same environment as the agent (the ratio is the agent's own cost), and the
bare loop under quiet against stock (what the tcache off costs the step itself); then
quiet as early stop runs it: a heap reading every `sequential.SPACING` calls, no
overhead budget (`--max-overhead 0`), in microseconds per step.

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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.analysis.sequential import SPACING  # noqa: E402
from harness.runtimes.base import quiet_tunables  # noqa: E402

AGENT = ROOT / "harness" / "agent" / "agent.py"
MODES = ("stock", "quiet")
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


def _env(heap: str) -> dict[str, str]:
    """This process's environment with the allocator settings of `heap:` (as
    `RunRequest.environment` sets them, PYTHONMALLOC=malloc in both)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONMALLOC", "GLIBC_TUNABLES")}
    env["PYTHONMALLOC"] = "malloc"
    if heap == "quiet":
        env["GLIBC_TUNABLES"] = quiet_tunables(None)
    return env


def bare(kind: str, n: int, workdir: Path, heap: str) -> float:
    out = subprocess.run([sys.executable, str(workdir / "bare.py"), kind, str(n)],
                         capture_output=True, text=True, check=True, env=_env(heap))
    return float(out.stdout.strip())


def agent(kind: str, n: int, workdir: Path, every: int, heap: str, budget: bool = True
          ) -> float:
    out = workdir / "samples.jsonl"
    out.unlink(missing_ok=True)
    extra = [] if budget else ["--max-overhead", "0"]
    subprocess.run([sys.executable, str(AGENT), "--scenario", str(workdir / "scen.py"),
                    "--params", json.dumps({"kind": kind}), "--iterations", str(n),
                    "--warmup", "50", "--sample-every", str(every), "--out", str(out),
                    "--heap", heap, "--quiet", "--no-gpu", *extra], check=True, env=_env(heap))
    end = json.loads(out.read_text().splitlines()[-1])
    return float(end["phases"]["measure"])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--iterations", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--sample-every", type=int, default=10)
    p.add_argument("--quick", action="store_true",
                   help="one round of 50 steps: checks the benchmark runs (CI), no figure")
    a = p.parse_args()
    if a.quick:
        a.iterations, a.rounds = 50, 1
    n = a.iterations
    with tempfile.TemporaryDirectory() as d:
        wd = Path(d)
        (wd / "scen.py").write_text(SCENARIO)
        (wd / "bare.py").write_text(BARE)
        print(f"agent overhead, {n} steps, sample every {a.sample_every} (stretched to "
              f"keep the agent under 1 %), {a.rounds} alternating rounds, "
              f"{sys.version.split()[0]}, PYTHONMALLOC=malloc\n")
        print("| step | heap | bare s (median) | agent s (median) | ratio agent/bare "
              "| goal <= 1.01 | bare quiet/stock | early stop: us/step over bare |")
        print("|---|---|---|---|---|---|---|---|")
        for kind in ("busy", "work"):
            got: dict[str, dict[str, list[float]]] = {
                m: {"bare": [], "agent": [], "early": []} for m in MODES}
            for _ in range(a.rounds):
                for m in MODES:
                    got[m]["bare"].append(bare(kind, n, wd, m))
                    got[m]["agent"].append(agent(kind, n, wd, a.sample_every, m))
                    got[m]["early"].append(agent(kind, n, wd, SPACING, m, budget=False))
            label = "1 ms busy-wait" if kind == "busy" else "fixed CPU work"
            base = statistics.median(got["stock"]["bare"])
            for m in MODES:
                g = got[m]
                ratio = statistics.median(x / y for x, y in zip(g["agent"], g["bare"], strict=True))
                alloc = statistics.median(g["bare"]) / base
                early = (statistics.median(g["early"]) - statistics.median(g["bare"])) / n
                print(f"| {label} | {m} | {statistics.median(g['bare']):.4f} | "
                      f"{statistics.median(g['agent']):.4f} | {ratio:.4f} | "
                      f"{'met' if ratio <= 1.01 else 'missed'} | {alloc:.3f} | "
                      f"{early * 1e6:.0f} |")
    print(f"\n(took {time.process_time():.1f} s CPU in this process; early stop reads "
          f"the heap every {SPACING} calls)")


if __name__ == "__main__":
    main()
