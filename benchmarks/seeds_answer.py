"""Time to the seeds' answer: the seeds' matrix (`matrix.yaml`: NGC TensorFlow 20.12 vs
22.12 x GPU 0 x three rfft scenarios) on the two simulated GPU hosts, end to end at the
matrix's defaults: `harness sweep` then `harness explain` of its results, per host, as
a user types them (each a fresh `python -m harness`). Prints per host the seconds of
the sweep, of explain and both, the cells, the exit codes and the answer reached (each
row's first bad image, or none; what explain named), then the total over both hosts.

The simulated hosts (`bash images/setup-gpu-sim.sh`, docs/gpu-hosts.md) run CPU
TensorFlow 1.15 under a fake NVML: the seed's 1.15.5 leak lives in NVIDIA's CUDA build,
so the answer here is what those stand-ins give, not the real GPU's.

    python benchmarks/seeds_answer.py [--hosts 3090 4090]
        [--quick]     (--quick: one host, one row, 150 calls a cell: CI's smoke run)

--quick sweeps examples/gpu-sim.yaml: matrix.yaml's rfft_loop row with `rounds: 0` (on a
busy host the rounds confirming 22.12 against 20.12 are 2 to 6 rounds of two more TF 1.15
containers, most of the smoke run's time; the full run keeps matrix.yaml's rounds).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIM = {"3090": "unix:///run/harness-sim/3090.sock", "4090": "unix:///run/harness-sim/4090.sock"}
EXIT_ENVIRONMENT = 3


def harness(args: list[str], host: str, log: Path) -> tuple[int, float, str]:
    """(exit code, seconds, stdout) of one `python -m harness` against `host`."""
    env = {**os.environ, "DOCKER_HOST": host, "PYTHONPATH": str(REPO)}
    t = time.perf_counter()
    with log.open("a") as err:
        done = subprocess.run([sys.executable, "-m", "harness", *args], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, stderr=err, text=True)
    return done.returncode, time.perf_counter() - t, done.stdout


def reachable(host: str) -> str | None:
    """None when the engine answers and has both NGC-like images, else why not."""
    for image in ("nvcr.io/nvidia/tensorflow:20.12-tf1-py3",
                  "nvcr.io/nvidia/tensorflow:22.12-tf1-py3"):
        done = subprocess.run(["docker", "-H", host, "image", "inspect", image],
                              capture_output=True, text=True)
        if done.returncode != 0:
            return (f"{image} on {host}: {done.stderr.strip()[:200]}\n"
                    "  fix: bash images/setup-gpu-sim.sh")
    return None


def answer(run_dir: Path) -> list[str]:
    """Each row's answer in results.json's words."""
    data = json.loads((run_dir / "results.json").read_text())
    return [f"{r['row']}: {r['sentence']}" for r in data.get("rows", [])]


def named(explain_out: str) -> str:
    """What explain named, in its first lines (or that it had nothing to explain)."""
    lines = [ln.strip() for ln in explain_out.splitlines() if ln.strip()]
    return " / ".join(lines[:3]) if lines else "(explain printed nothing)"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--hosts", nargs="+", default=sorted(SIM), choices=sorted(SIM))
    p.add_argument("--quick", action="store_true",
                   help="the 3090 host and the rfft_loop row only (examples/gpu-sim.yaml), "
                         "150 calls a cell")
    a = p.parse_args()
    if a.quick:
        a.hosts = ["3090"]
    for name in a.hosts:
        why = reachable(SIM[name])
        if why is not None:
            print(f"seeds_answer: simulated host {name} unavailable: {why}", file=sys.stderr)
            return EXIT_ENVIRONMENT
    matrix, swept = (("examples/gpu-sim.yaml", "tf1-rfft-sim") if a.quick else
                     ("matrix.yaml", "tf1-rfft"))
    short = ["--iterations", "150", "--warmup", "20"] if a.quick else []
    total = 0.0
    print(f"the seeds' matrix ({matrix}) on simulated hosts, sweep + explain, "
          f"{'--quick: one row, 150 calls a cell, no rounds' if a.quick else 'at the defaults'}"
          "\n")
    print("| host | cells | sweep s | explain s | total s | exits | answer | explain named |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        for name in a.hosts:
            out, log = Path(d) / name, Path(d) / f"{name}.log"
            code_s, sweep_s, _ = harness(["sweep", matrix, "--out", str(out), "-q", *short],
                                         SIM[name], log)
            runs = sorted((out / swept).glob("*/results.json"))
            if not runs:
                print(f"seeds_answer: the sweep on {name} exited {code_s} and wrote no "
                      f"results:\n{log.read_text()[-2000:]}", file=sys.stderr)
                return code_s or 1
            run_dir = runs[-1].parent
            code_e, explain_s, said = harness(["explain", str(run_dir), "-q"], SIM[name], log)
            cells = len(list(run_dir.glob("cells/*/result.json")))
            total += sweep_s + explain_s
            print(f"| simulated RTX {name} | {cells} | {sweep_s:.1f} | {explain_s:.1f} | "
                  f"{sweep_s + explain_s:.1f} | sweep {code_s}, explain {code_e} | "
                  f"{'; '.join(answer(run_dir))} | {named(said)} |")
    print(f"\nboth hosts, one after the other: {total:.1f} s to the answer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
