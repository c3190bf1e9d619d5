"""harness's live leak decision side by side with psleak on real leaking and fixed releases.

For each case of `benchmarks/cases/cases.py` (pinned releases with a known C-level leak
and the release that fixed it, plus clean controls) it builds a venv under
~/.cache/harness/bench-venvs/ (the pinned package + psleak), then `--runs` times each of

- harness quiet: the agent as a sweep runs it with `heap: quiet` (the default): the
  environment of `RunRequest.environment` (PYTHONMALLOC=malloc, glibc's tcache off) and
  the agent's `--heap quiet` (gc.collect() before each heap reading);
- harness stock: `heap: stock` (PYTHONMALLOC=malloc only, the heap as the scenario leaves
  it);

  both with the live schedule of `harness.analysis.sequential` (first look
  `FIRST_LOOK`, a heap reading every `SPACING` calls, up to 2000 calls) after the
  warm-up a sweep gives by default (`warmup`, 200 calls),
  tailed by `sequential.watch_file` feeding the sweep's decider (`sequential.LiveDecider`);
  on a decision the control file stops the agent. Calls = measured iterations at the
  decision; wall time from the agent's start to the decision (interpreter start-up and
  imports included). A run that ends undecided at the maximum gets the post-run
  `memory_trend` verdict on the heap;
- psleak defaults: `MemoryLeakTestCase.execute(fun)`, under PYTHONMALLOC=malloc; calls
  counted (warm-up included), wall time from the first call to the verdict;
- psleak `times=2`: the same with `execute(fun, times=2)`.

psleak's defaults spend their full schedule (~22.7k calls, seconds) on every leak, so
leaking cases run them `--psleak-leak-runs` times (default 10).

`--quick` (CI): one leaking case, 1 run, no psleak defaults, harness's runs up to
QUICK_ITERATIONS calls; seconds once its venv exists. Exit 3 when a venv cannot be
built (no pip, no index).

Run: python benchmarks/vs_psleak.py [--runs 100] [--cases multidict,ujson] [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from cases.cases import CASES, Case  # noqa: E402

from harness.analysis.memory import memory_trend  # noqa: E402
from harness.analysis.sequential import (  # noqa: E402
    FIRST_LOOK,
    SPACING,
    LiveDecider,
    LiveDecision,
    Watched,
    watch_file,
)
from harness.matrixfile.model import (  # noqa: E402
    Cell,
    GpuSel,
    HeapMode,
    ImageSpec,
    RunSettings,
    ScenarioSpec,
)
from harness.protocol.ingest import Record  # noqa: E402
from harness.runtimes.base import ImageInfo, RunRequest  # noqa: E402
from harness.thresholds import AnalysisConfig  # noqa: E402

PSLEAK = "psleak==0.1.6"
VENVS = Path.home() / ".cache" / "harness" / "bench-venvs"
AGENT = ROOT / "harness" / "agent" / "agent.py"
CASE_DIR = ROOT / "benchmarks" / "cases"
EXAMPLES = ROOT / "examples" / "scenarios"   # the cases that are examples too live there
MAX_ITERATIONS, WARMUP = 2000, RunSettings().warmup   # a sweep's warm-up by default
QUICK_ITERATIONS = 400                       # --quick: harness's runs' most calls
LEAK_GOAL, STABLE_GOAL = 80, 150             # median measured calls to a right verdict
QUICK_CASE = "multidict 6.6.3"
CFG = AnalysisConfig()


def scenario_path(case: Case) -> Path:
    """The case's scenario: benchmarks/cases/, else examples/scenarios/ (one copy)."""
    own = CASE_DIR / case.scenario
    return own if own.is_file() else EXAMPLES / case.scenario


# psleak on one scenario (argv: scenario path, params JSON, times or ""); one JSON line.
PSLEAK_DRIVER = """
import importlib.util, json, sys, time, unittest
import psleak
spec = importlib.util.spec_from_file_location("scenario", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
state = mod.setup(json.loads(sys.argv[2]))
opts = {"times": int(sys.argv[3])} if sys.argv[3] else {}
calls = [0]
def fun():
    calls[0] += 1
    mod.step(state)
class T(psleak.MemoryLeakTestCase):
    def test_step(self):
        self.execute(fun, **opts)
t0 = time.perf_counter()
res = unittest.TextTestRunner(verbosity=0, stream=open("/dev/null", "w")).run(
    unittest.defaultTestLoader.loadTestsFromTestCase(T))
wall = time.perf_counter() - t0
verdict = ("leak" if res.failures else "error" if res.errors else
           "skip" if res.skipped else "stable")
print(json.dumps({"verdict": verdict, "calls": calls[0], "wall": wall}))
"""


@dataclasses.dataclass
class Tally:
    verdicts: list[str] = dataclasses.field(default_factory=list)
    calls: list[int] = dataclasses.field(default_factory=list)
    walls: list[float] = dataclasses.field(default_factory=list)

    def add(self, verdict: str, calls: int, wall: float) -> None:
        self.verdicts.append(verdict)
        self.calls.append(calls)
        self.walls.append(wall)

    def right(self, leaks: bool) -> int:
        return sum(v == ("leak" if leaks else "stable") for v in self.verdicts)

    def false_leaks(self, leaks: bool) -> int:
        return 0 if leaks else sum(v == "leak" for v in self.verdicts)

    def cell(self, leaks: bool) -> str:
        """'median (max) calls, wall s, right/runs[, false leaks]' or '-'."""
        n = len(self.verdicts)
        if not n:
            return "-"
        fp = "" if leaks else f", {self.false_leaks(leaks)} false"
        return (f"{statistics.median(self.calls):.0f} (max {max(self.calls)}), "
                f"{statistics.median(self.walls):.2f} s, {self.right(leaks)}/{n}{fp}")


def venv(case: Case) -> Path:
    """The cached venv of a case: its pinned requirement and psleak.

    Raises:
        RuntimeError: the venv or its packages cannot be installed.
    """
    name = (case.requirement or "stdlib").replace("==", "-")
    path = VENVS / name
    python = path / "bin" / "python"
    if not (path / ".complete").exists():
        reqs = [r for r in (case.requirement, PSLEAK) if r]
        for cmd in ([sys.executable, "-m", "venv", "--clear", str(path)],
                    [str(python), "-m", "pip", "install", "-q", *reqs]):
            got = subprocess.run(cmd, capture_output=True, text=True)
            if got.returncode:
                raise RuntimeError(f"cannot build {path} ({' '.join(reqs)}): "
                                   f"{(got.stderr or got.stdout).strip()[-400:]}")
        (path / ".complete").touch()
    return python


def cell_env(case: Case, heap: HeapMode) -> dict[str, str]:
    """The environment a sweep gives this case's cell under `heap:` (the one place
    runtimes take it from: `RunRequest.environment`), over this process's."""
    settings = RunSettings(heap=heap, max_iterations=MAX_ITERATIONS)
    cell = Cell(case.name, ImageSpec("venv", "python", 0), GpuSel("none"),
                ScenarioSpec("case", scenario_path(case), dict(case.params), settings))
    request = RunRequest(cell, ImageInfo("python"), Path("."), Path("stop"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONMALLOC", "GLIBC_TUNABLES")}
    return env | request.environment()


class TimedDecider(LiveDecider):
    """A LiveDecider that notes when (time.perf_counter) it decided."""

    decided_at: float | None = None

    def feed(self, record: Record) -> LiveDecision | None:
        got = super().feed(record)
        if got is not None:
            self.decided_at = time.perf_counter()
        return got


def decider(most: int = MAX_ITERATIONS) -> TimedDecider:
    """The sweep's decider (as `sequential.LiveDecider` makes it), timed."""
    return TimedDecider(CFG, FIRST_LOOK, most, floor=CFG.live_floor_bytes,
                        min_growth=CFG.live_min_growth_bytes,
                        decay_ratio=CFG.live_decay_ratio)


def run_harness(python: Path, case: Case, heap: HeapMode, work: Path,
                most: int = MAX_ITERATIONS) -> tuple[str, int, float]:
    out, ctrl = work / "samples.jsonl", work / "stop"
    for p in (out, ctrl):
        p.unlink(missing_ok=True)
    cmd = [str(python), str(AGENT), "--scenario", str(scenario_path(case)),
           "--params", json.dumps(case.params), "--iterations", str(most),
           "--warmup", str(WARMUP), "--sample-every", str(SPACING), "--max-overhead", "0",
           "--heap", heap, "--out", str(out), "--control", str(ctrl), "--quiet", "--no-gpu"]
    timed = decider(most)
    stop = threading.Event()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=cell_env(case, heap))
    box: list[tuple[Watched, float]] = []

    def watch() -> None:
        # watch_file reads on to the file's end once `stop` is set after the agent exits.
        box.append((watch_file(out, timed, ctrl, stop), time.perf_counter() - t0))

    watcher = threading.Thread(target=watch)
    watcher.start()
    proc.wait(timeout=600)
    stop.set()
    watcher.join()
    watched, wall = box[0]
    if watched.decision is not None and timed.decided_at is not None:
        return (str(watched.decision.verdict), int(watched.decision.iterations),
                timed.decided_at - t0)
    # Undecided at MAX: the fixed-length verdict on the heap, as after any run.
    x, y = watched.series.memory("heap")
    heap_cfg = dataclasses.replace(CFG, leak_floor_bytes=CFG.heap_floor_bytes)
    kind = memory_trend("heap", x, y, heap_cfg).kind
    return ("leak" if kind == "leak" else "stable"), int(x[-1] - WARMUP) if len(x) else 0, wall


def run_psleak(python: Path, case: Case, work: Path, times: int | None
               ) -> tuple[str, int, float]:
    return psleak_on(python, scenario_path(case), case.params, work, times)


def psleak_on(python: Path, script: Path, params: object, work: Path, times: int | None
              ) -> tuple[str, int, float]:
    """psleak's verdict on one scenario file under `python` (a venv holding psleak):
    (verdict, calls, wall s); benchmarks/corpus.py drives its cases through it too."""
    driver = work / "psleak_driver.py"
    driver.write_text(PSLEAK_DRIVER)
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"} | {
        "PYTHONMALLOC": "malloc"}
    res = subprocess.run([str(python), str(driver), str(script), json.dumps(params),
                          str(times or "")], env=env, check=True,
                         capture_output=True, text=True, timeout=600)
    got = json.loads(res.stdout.strip().splitlines()[-1])
    return str(got["verdict"]), int(got["calls"]), float(got["wall"])


TOOLS = ("harness quiet", "harness stock", "psleak defaults", "psleak times=2")


def measure(case: Case, runs: int, psleak_full_runs: int, work: Path,
            most: int = MAX_ITERATIONS) -> dict[str, Tally]:
    """Every tool's tally on `case`, the tools' runs interleaved (a busy spell of the
    machine falls on all of them); harness's runs make `most` calls at most."""
    python = venv(case)
    got = {t: Tally() for t in TOOLS}
    for k in range(runs):
        got["harness quiet"].add(*run_harness(python, case, "quiet", work, most))
        got["harness stock"].add(*run_harness(python, case, "stock", work, most))
        got["psleak times=2"].add(*run_psleak(python, case, work, 2))
        if k < psleak_full_runs:
            got["psleak defaults"].add(*run_psleak(python, case, work, None))
    return got


def table(rows: list[tuple[Case, dict[str, Tally]]]) -> list[str]:
    lines = ["| case | truth | " + " | ".join(TOOLS) + " |", "|---" * (2 + len(TOOLS)) + "|"]
    for case, got in rows:
        cells = " | ".join(got[t].cell(case.leaks) for t in TOOLS)
        lines.append(f"| {case.name} | {'leak' if case.leaks else 'fixed'} | {cells} |")
    return lines


def goal(rows: list[tuple[Case, dict[str, Tally]]], tool: str) -> tuple[bool, int]:
    """(every case of `tool` right in every run within the median goals, false leaks)."""
    ok = all(t.right(c.leaks) == len(t.verdicts) and statistics.median(t.calls)
             <= (LEAK_GOAL if c.leaks else STABLE_GOAL)
             for c, got in rows for t in (got[tool],) if t.verdicts)
    return ok, sum(got[tool].false_leaks(c.leaks) for c, got in rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--psleak-leak-runs", type=int, default=10)
    p.add_argument("--cases", default="", help="comma-separated substrings of case names")
    p.add_argument("--quick", action="store_true",
                   help=f"CI: {QUICK_CASE!r} only, 1 run, no psleak defaults, "
                        f"{QUICK_ITERATIONS} calls at most")
    args = p.parse_args(argv)
    most = QUICK_ITERATIONS if args.quick else MAX_ITERATIONS
    if args.quick:
        args.runs, args.cases, args.psleak_leak_runs = 1, QUICK_CASE, 0
    if args.runs < 1:
        p.error("--runs must be >= 1")
    picked = [c for c in CASES if not args.cases
              or any(s.strip() and s.strip() in c.name for s in args.cases.split(","))]
    if not picked:
        p.error(f"--cases {args.cases!r} names none of: {', '.join(c.name for c in CASES)}")
    started = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory(prefix="vs-psleak-") as tmp:
        for case in picked:
            full = args.psleak_leak_runs if case.leaks else args.runs
            try:
                rows.append((case, measure(case, args.runs, min(args.runs, full), Path(tmp),
                                           most)))
            except RuntimeError as exc:
                print(f"vs_psleak: {exc}\n  fix: pip and a package index must be "
                      "reachable to build the benchmark's venvs", file=sys.stderr)
                return 3
            print(f"  {case.name}: done ({time.perf_counter() - started:.0f} s)",
                  file=sys.stderr)
    print(f"harness: the sweep's live decider (floor {CFG.live_floor_bytes:.0f} B/call, "
          f"alpha {CFG.alpha}, first look {FIRST_LOOK} / max {most} measured "
          f"calls, {WARMUP} warm-up, a heap reading every {SPACING}); quiet: tcache off, "
          "gc.collect() before each heap reading; stock: the heap as left. psleak 0.1.6. "
          "Cells: calls to verdict, median (max); wall s, median; right/runs; false "
          "leaks. harness counts measured calls, psleak all calls.\n")
    print("\n".join(table(rows)))
    for tool in ("harness quiet", "harness stock"):
        ok, fps = goal(rows, tool)
        print(f"\n{tool}: goal (every run right; median calls <= {LEAK_GOAL} to a leak, "
              f"<= {STABLE_GOAL} to stable) {'met' if ok else 'missed'}; false leaks on "
              f"fixed versions and controls: {fps}.", end="")
    print(f"\n({time.perf_counter() - started:.0f} s; numpy {np.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
