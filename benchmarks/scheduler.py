"""Scheduler speed-up: sweep wall time with N simulated GPUs vs the ideal cells/N.

Runs `--cells` cells through the real orchestrator (lanes, max-parallel, analysis,
store) with a fake runtime whose cells each hold their GPU for `--hold` seconds.
With N GPUs the matrix has cells/N images x N GPUs, so each GPU gets cells/N cells and
the ideal wall time is cells/N x hold. Prints measured wall time (first cell start to
last cell end, and the whole sweep including analysis) and the ratio to the ideal.

    python benchmarks/scheduler.py [--cells 16] [--hold 0.25] [--gpus 1 2 4] [--quick]
    (--quick: 4 cells of 0.05 s on 1 and 2 GPUs: CI's smoke run)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

# The fake runtime is a test double: it lives in tests/, not in the package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fakeruntime import Behaviour, FakeRuntime

from harness import matrixfile
from harness.runtimes.base import Progress, RunOutcome, RunRequest
from harness.stages.orchestrator import prefetch_analysis, sweep
from harness.store import RunStore

SCENARIO = "def setup(params):\n    return None\n\n\ndef step(state):\n    pass\n"


class HoldingRuntime(FakeRuntime):
    def __init__(self, hold: float):
        super().__init__(lambda cell: Behaviour())
        self.hold = hold
        self.spans: list[tuple[float, float]] = []
        self.lock = threading.Lock()

    def run(self, request: RunRequest, progress: Progress) -> RunOutcome:
        start = time.monotonic()
        outcome = super().run(request, progress)
        time.sleep(max(0.0, self.hold - (time.monotonic() - start)))
        with self.lock:
            self.spans.append((start, time.monotonic()))
        return outcome


def measure(workdir: Path, cells: int, gpus: int, hold: float) -> tuple[float, float]:
    (workdir / "loop.py").write_text(SCENARIO)
    images = ", ".join(f"{{name: v{i}}}" for i in range(cells // gpus))
    m = workdir / f"m{gpus}.yaml"
    m.write_text(f"name: sched{gpus}\nruntime: local\n"
                 "defaults: {iterations: 40, warmup: 0, sample_every: 5, repeats: 0}\n"
                 f"matrix:\n  image: [{images}]\n  gpu: [{', '.join(map(str, range(gpus)))}]\n"
                 "  scenario: [loop.py]\n")
    matrix = matrixfile.load(m)
    assert len(matrix.cells) == cells, "cells must be a multiple of every N"
    runtime = HoldingRuntime(hold)
    store = RunStore.open(workdir / "reports", matrix.name, False)
    try:
        t0 = time.monotonic()
        sweep(matrix, list(matrix.cells), runtime, store, lambda _: None, False)
        total = time.monotonic() - t0
    finally:
        store.unlock()
    busy = max(e for _, e in runtime.spans) - min(s for s, _ in runtime.spans)
    return busy, total


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--cells", type=int, default=16)
    p.add_argument("--hold", type=float, default=0.25, help="seconds each cell holds its GPU")
    p.add_argument("--gpus", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--quick", action="store_true", help="4 cells of 0.05 s on 1 and 2 GPUs")
    a = p.parse_args()
    if a.quick:
        a.cells, a.hold, a.gpus = 4, 0.05, [1, 2]
    prefetch_analysis().join()  # SciPy's import is not the scheduler's cost
    print(f"{a.cells} cells of {a.hold:.2f} s; ideal wall = cells/N x {a.hold:.2f} s")
    print(f"{'N':>3} {'ideal s':>8} {'cells s':>8} {'ratio':>6} {'sweep s':>8} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as d:
        for n in a.gpus:
            busy, total = measure(Path(d), a.cells, n, a.hold)
            ideal = a.cells / n * a.hold
            print(f"{n:>3} {ideal:>8.2f} {busy:>8.2f} {busy / ideal:>6.2f} "
                  f"{total:>8.2f} {total / ideal:>6.2f}")


if __name__ == "__main__":
    main()
