"""A real slowdown and an unchanged pair, swept beside busy loops (issue 61 point 5).

On a host busy with other work, the confirmation rounds that settle a change against the
row's baseline see run-queue delay; rounds with too much of it were left out, and where
all were, the cell ended `ok`, exit 0. Now a busy round counts where CPU time per step
reads the change as the wall clock does, and rounds that settle nothing leave the cell
`ambiguous` (exit 4).

Two images (two interpreters of this machine, the baseline first) run one CPU-bound
scenario: `slowdown` does `factor` times the work on the second image, `same` the same
work on both. Each is swept (`runtime: local`, harness's defaults) beside 0, 2 and 6
busy loops (`python3 -c 'while True: pass'`), and the table gives the second cell's
verdict, the rounds counted and left out, and the sweep's exit code.

With `--beside CMD`, CMD (a shell command: a container build, a test suite) runs over
and over beside every sweep as well, and the load average is printed per row.

Run: PYTHONPATH=. python benchmarks/busy_rounds.py [--loops 0,2,6] [--factor 10]
     [--beside CMD] [--quick]   (CI: the slowdown beside 1 loop only, at nice 19, each
     cell a 0.5 s budget: the loaded path smoke-tested, CI's CPU not spent on the loop)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.pythons import pythons

ROOT = Path(__file__).resolve().parents[1]
QUICK_BUDGET = "0.5s"   # --quick: each cell's budget

SCENARIO = '''
import sys


def setup(params):
    slow = params["factor"] if sys.version_info[:2] == tuple(params["slow_on"]) else 1
    return {"n": int(2000 * slow)}


def step(state):
    total = 0
    for i in range(state["n"]):
        total += i * i
    return total
'''


def interpreters() -> list[str]:
    """Two interpreters of different minor versions, or the running one twice."""
    found = [p for minor in (11, 12) for p in pythons(minor)[-1:]]
    return found if len(found) == 2 else [sys.executable, sys.executable]


def sweep(tmp: Path, factor: float, pythons: list[str], budget: str | None = None
          ) -> tuple[int, dict[str, object]]:
    minor = subprocess.run([pythons[1], "-c", "import sys; print(*sys.version_info[:2])"],
                           capture_output=True, text=True, check=True).stdout.split()
    params = {"factor": factor, "slow_on": [int(x) for x in minor]}
    (tmp / "work.py").write_text(SCENARIO)
    (tmp / "m.yaml").write_text(
        "name: busy\nruntime: local\n"
        + (f"defaults: {{budget: {budget}}}\n" if budget else "")
        + "matrix:\n  image:\n"
        f"    - {{name: a, python: {pythons[0]}}}\n    - {{name: b, python: {pythons[1]}}}\n"
        f"  scenario:\n    - {{script: work.py, params: {json.dumps(params)}}}\n"
        "baseline: {image: a}\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    code = subprocess.run([sys.executable, "-m", "harness", "sweep", str(tmp / "m.yaml"),
                           "--out", str(tmp / "r"), "-q"], cwd=tmp, env=env,
                          capture_output=True, check=False).returncode
    [results] = sorted((tmp / "r" / "busy").glob("*/results.json"))[-1:]
    cells = json.loads(results.read_text())["cells"]
    return code, cells["b.cpu.work"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--loops", default="0,2,6")
    p.add_argument("--factor", type=float, default=10.0)
    p.add_argument("--beside", metavar="CMD", help="a shell command run over and over "
                   "beside each sweep (a container build, a test suite)")
    p.add_argument("--quick", action="store_true", help="CI: beside 1 loop only, 0.5 s budgets")
    args = p.parse_args()
    loops = [1] if args.quick else [int(x) for x in args.loops.split(",")]
    pythons = interpreters()
    print(f"images: a={pythons[0]}, b={pythons[1]}")
    if args.beside:
        print(f"beside each sweep, over and over: {args.beside}")
    print(f"{'case':9} {'loops':>5} {'verdict':11} {'rule':10} {'rounds':>6} {'left out':>8} "
          f"{'exit':>4}  ratio   load (1 min, at the end)")
    for n in loops:
        # --quick: the loop at nice 19, so the smoke run's loop takes only what no other
        # job wants (CI's other tests), as load_verdicts.py's --quick does
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                 preexec_fn=(lambda: os.nice(19)) if args.quick else None)
                for _ in range(n)]
        beside = subprocess.Popen(
            ["bash", "-c", f"while true; do {args.beside}; done"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True) if args.beside else None
        try:
            cases = [("slowdown", args.factor), ("same", 1.0)][:1 if args.quick else 2]
            for case, factor in cases:
                with tempfile.TemporaryDirectory() as d:
                    code, cell = sweep(Path(d), factor, pythons, QUICK_BUDGET if args.quick
                                       else None)
                vs = cell.get("vs_baseline") or {}
                conf = vs.get("confirmation") or {}
                rounds = conf.get("rounds") or []
                out = sum(1 for r in rounds if r.get("excluded"))
                ratio = conf.get("ratio")
                print(f"{case:9} {n:5} {cell['verdict']:11} {cell.get('rule', ''):10} "
                      f"{len(rounds):6} {out:8} {code:4}  "
                      f"{'-' if ratio is None else f'{ratio:.2f}x':7} "
                      f"{os.getloadavg()[0]:.1f}", flush=True)
        finally:
            for b in busy:
                b.kill()
                b.wait()
            if beside is not None:
                os.killpg(beside.pid, 9)    # the command's own children too
                beside.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
