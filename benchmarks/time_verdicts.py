"""Time verdicts on real processes: false regressions, found regressions and slowdowns.

Every sweep is a real `harness` sweep on the local runtime (real agent processes on
this machine, the same pipeline as `harness sweep`), on small synthetic scenarios so a
sweep takes seconds:

- `work.py`: a fixed amount of pure-Python work per step (~1 ms), times `factor`
  (from the BENCH_FACTOR environment variable, set by the "image": a wrapper
  interpreter) and optionally growing per call (CPU-bound slowdown);
- `wait.py`: a step that sleeps ~1 ms, the sleep growing per call (wait-bound: CPU
  time flat, as a step waiting on a GPU is).

Lines (each `--sweeps` sweeps):

- identical: images a and b are the same interpreter under two names; a
  `regression` is false. "pooled" counts what the pooled test alone (before
  confirmation) said;
- 1.3x slower: b runs 1.3x the work; found = `regression`;
- within-run 1.5x CPU-bound / wait-bound: one cell whose late steps take 1.5x the
  early ones; found = `slowdown`;
- flat under burst: one flat CPU-bound cell; a `slowdown` is false.

With `--burst` (default on for identical, 1.3x and flat), each sweep starts busy
processes on every core (`while True: pass`) for 10-15 s at a random moment within
the sweep's expected length; they are always terminated when the sweep ends.

"cost" is the sweep's wall time over the sum of its cells' own times: the extra machine
time that confirmation rounds (and their back-off after busy rounds) add.

Run: python benchmarks/time_verdicts.py [--sweeps 20] [--lines identical,slower,...]
     [--quick]     (--quick: one sweep of the identical and wait-bound lines, no burst,
                    a third of the work per step: CI's smoke run of a row comparison and
                    a within-run verdict)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import matrixfile
from harness.runtimes.local import LocalRuntime
from harness.stages.orchestrator import sweep
from harness.store import RunStore

WORK = '''
import os


def setup(params):
    loops = int(params["loops"] * float(os.environ.get("BENCH_FACTOR", "1")))
    return {"loops": loops, "grow": params.get("grow", 0.0), "calls": params["calls"], "n": 0}


def step(state):
    state["n"] += 1
    n = int(state["loops"] * (1 + state["grow"] * state["n"] / state["calls"]))
    x = 0
    for i in range(n):
        x += i
'''
WAIT = '''
import time


def setup(params):
    return {"s": params["sleep_s"], "grow": params["grow"], "calls": params["calls"], "n": 0}


def step(state):
    state["n"] += 1
    time.sleep(state["s"] * (1 + state["grow"] * state["n"] / state["calls"]))
'''
ITERATIONS, WARMUP = 400, 20
LOOPS, QUICK_LOOPS = 30000, 10000   # work.py's loop per step (~1 ms; --quick: ~0.3 ms)
CALLS = ITERATIONS + WARMUP
# late/early medians at 7/8 and 1/8 of the calls: (1 + 7g/8) / (1 + g/8) = 1.5
GROW_15 = 0.5 / 0.6875


@dataclass
class Line:
    name: str
    images: list[tuple[str, float]]   # (label, BENCH_FACTOR)
    scenario: str                     # work / wait
    params: dict[str, Any]
    burst: bool
    want: str                         # the verdict that counts, on the last cell
    good: bool                        # is `want` the right answer?
    est_s: float                      # expected sweep length without burst


LINES = {
    "identical": Line("identical images, 2 tags", [("a", 1.0), ("b", 1.0)], "work",
                      {}, True, "regression", False, 4.0),
    "slower": Line("1.3x slower image", [("a", 1.0), ("b", 1.3)], "work", {}, True,
                   "regression", True, 4.0),
    "cpu": Line("within-run 1.5x, CPU-bound", [("a", 1.0)], "work", {"grow": GROW_15},
                False, "slowdown", True, 1.5),
    "wait": Line("within-run 1.5x, wait-bound", [("a", 1.0)], "wait",
                 {"sleep_s": 0.001, "grow": GROW_15}, False, "slowdown", True, 1.5),
    "flat": Line("flat, under burst", [("a", 1.0)], "work", {}, True, "slowdown", False, 1.5),
}


class Burst:
    """Busy processes on every core for 10-15 s from a random moment; always stopped."""

    def __init__(self, rng: random.Random, within_s: float):
        self.delay = rng.uniform(0.0, within_s)
        self.length = rng.uniform(10.0, 15.0)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.hit = False

    def _run(self) -> None:
        if self.stop.wait(self.delay):
            return
        self.hit = True
        for _ in range(os.cpu_count() or 1):
            self.procs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        self.stop.wait(self.length)
        self._kill()

    def _kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def __enter__(self) -> Burst:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self._kill()


@dataclass
class Tally:
    sweeps: int = 0
    hits: int = 0
    pooled: int = 0
    bursts: int = 0
    wall_s: float = 0.0
    cells_s: float = 0.0
    reruns: int = 0
    notes: list[str] = field(default_factory=list)


def setup_dir(root: Path) -> None:
    (root / "work.py").write_text(WORK)
    (root / "wait.py").write_text(WAIT)
    for label, factor in (("a", 1.0), ("b", 1.0), ("b13", 1.3)):
        wrapper = root / f"py-{label}"
        wrapper.write_text(f"#!/bin/sh\nBENCH_FACTOR={factor} exec {sys.executable} \"$@\"\n")
        wrapper.chmod(0o755)


def matrix_text(line: Line, root: Path, loops: int = LOOPS) -> str:
    images = []
    for label, factor in line.images:
        wrapper = "py-b13" if factor != 1.0 else f"py-{label}"
        images.append(f"{{name: {label}, python: {root / wrapper}}}")
    params = {"loops": loops, "calls": CALLS, **line.params}
    return (f"name: tv\nruntime: local\n"
            f"defaults: {{iterations: {ITERATIONS}, warmup: {WARMUP}, sample_every: 10}}\n"
            f"matrix:\n  image: [{', '.join(images)}]\n"
            f"  scenario:\n    - {{script: {line.scenario}.py, params: {json.dumps(params)}}}\n")


def one_sweep(line: Line, root: Path, k: int, rng: random.Random, burst: bool,
              log: Any, loops: int = LOOPS) -> tuple[dict[str, Any], float, bool]:
    m = root / f"m-{k}.yaml"
    m.write_text(matrix_text(line, root, loops))
    matrix = matrixfile.load(m)
    store = RunStore.open(root / "out", f"{line.scenario}-{k}", False)
    t0 = time.monotonic()
    hit = False
    try:
        if burst:
            with Burst(rng, line.est_s) as b:
                out = sweep(matrix, list(matrix.cells), LocalRuntime(root / "cache"), store,
                            lambda s: print(s, file=log), False)
            hit = b.hit
        else:
            out = sweep(matrix, list(matrix.cells), LocalRuntime(root / "cache"), store,
                        lambda s: print(s, file=log), False)
    finally:
        store.unlock()
    wall = time.monotonic() - t0
    last = max(out.results.values(), key=lambda r: r.image.index)
    cells_s = sum(r.timings.cell_s for r in out.results.values())
    return {"last": last, "cells_s": cells_s,
            "reruns": sum(len(r.attempts) - 1 for r in out.results.values())}, wall, hit


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sweeps", type=int, default=20)
    parser.add_argument("--lines", default=",".join(LINES))
    parser.add_argument("--no-burst", action="store_true")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--log", default=None, help="progress lines of every sweep")
    parser.add_argument("--json", default=None, help="write the tallies here")
    parser.add_argument("--quick", action="store_true",
                        help="one sweep of the identical and wait-bound lines, no burst")
    args = parser.parse_args()
    if args.quick:
        args.sweeps, args.no_burst, args.lines = 1, True, "identical,wait"
    # SIGTERM unwinds like Ctrl-C, so a running burst is always terminated.
    signal.signal(signal.SIGTERM, _interrupt)
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="time-verdicts-"))
    setup_dir(root)
    tallies: dict[str, Tally] = {}
    with open(args.log or os.devnull, "w") as log:
        run_lines(args, rng, root, log, tallies)
    print_table(tallies)
    if args.json:
        Path(args.json).write_text(json.dumps({k: vars(v) for k, v in tallies.items()},
                                              indent=1))
    return 0


def run_lines(args: argparse.Namespace, rng: random.Random, root: Path, log: Any,
              tallies: dict[str, Tally]) -> None:
    try:
        for key in args.lines.split(","):
            line = LINES[key]
            t = tallies[key] = Tally()
            for k in range(args.sweeps):
                print(f"--- {key} sweep {k}", file=log, flush=True)
                got, wall, hit = one_sweep(line, root, k, rng, line.burst and not args.no_burst,
                                           log, QUICK_LOOPS if args.quick else LOOPS)
                last = got["last"]
                t.sweeps += 1
                t.hits += last.verdict == line.want
                vs = last.vs_baseline
                t.pooled += vs is not None and vs.steps is not None and \
                    vs.steps.direction == "slower"
                t.bursts += hit
                t.wall_s += wall
                t.cells_s += got["cells_s"]
                t.reruns += got["reruns"]
                if (last.verdict == line.want) != line.good:
                    t.notes.append(f"sweep {k}: {last.verdict} ({last.reason})")
                print(f"{key} {k}: {last.verdict} ({last.reason}) "
                      f"wall {wall:.1f}s burst={hit}", file=log, flush=True)
            print(f"{key}: {t.hits}/{t.sweeps} {line.want}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def print_table(tallies: dict[str, Tally]) -> None:
    print("| line | sweeps | burst hit | result | goal | pooled test alone said slower "
          "| re-runs | cost (wall / cells) |")
    print("|---|---:|---:|---|---|---:|---:|---:|")
    for key, t in tallies.items():
        line = LINES[key]
        share = t.hits / t.sweeps if t.sweeps else 0.0
        if line.good:
            result, goal = f"found {t.hits}/{t.sweeps} ({share:.0%})", ">= 95 %"
        else:
            result = f"false {line.want} {t.hits}/{t.sweeps} ({share:.0%})"
            goal = "0" if key == "identical" else "<= 1 %"
        pooled = f"{t.pooled}/{t.sweeps}" if len(line.images) > 1 else "-"
        cost = f"{t.wall_s / t.cells_s:.2f}x" if t.cells_s else "-"
        print(f"| {line.name} | {t.sweeps} | {t.bursts} | {result} | {goal} | {pooled} | "
              f"{t.reruns} | {cost} |")
    for key, t in tallies.items():
        for note in t.notes:
            print(f"  {key}: {note}")


if __name__ == "__main__":
    sys.exit(main())
