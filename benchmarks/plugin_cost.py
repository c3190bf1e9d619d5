"""What a trivial marked test costs beyond its budget (issue 79 item 4): a generated file
of `--tests` tests, each `@pytest.mark.harness_leaks(budget=B)` over `sum(range(10))`,
run by pytest with this checkout's plugin and, with `--before ROOT`, another checkout's
(e.g. `git archive` of an earlier commit), the two alternated `--rounds` times so the
machine's load falls on both alike.

Per run, from junit-xml: each test's time (setup, call and teardown, as pytest times
it) less the budget: mean, median, max, and the first test's (the one that paid for
the warm interpreter's start, before it started ahead); the CPU seconds per test of
pytest and every process it waited for (the fork server and its runs: what the cost
takes of a machine, the load aside); the 1-minute load average before and after. The
budget is counted in the run's own time (its wall time less its run-queue delay), so on
a busy host the wall time stretches by design: read the cost on a quiet one.

`--quick` (CI): 4 tests at 0.2 s, this checkout only.

Run: PYTHONPATH=. python3 benchmarks/plugin_cost.py [--tests 40] [--budget 0.5s]
     [--before ROOT] [--rounds 2] [--quick]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 1800

TEST = '''
@pytest.mark.harness_leaks(budget={budget!r})
def test_trivial_{n:03d}():
    sum(range(10))
'''


@dataclass
class Run:
    name: str
    times: list[float]      # each test's junit time less the budget
    cpu_s: float            # pytest's and its children's CPU seconds, all tests
    load: tuple[float, float]
    passed: int

    def row(self) -> str:
        t, load = self.times, f"{self.load[0]:.1f}-{self.load[1]:.1f}"
        if not t:
            return f"| {self.name} | 0 | - | - | - | - | - | {load} |"
        return (f"| {self.name} | {self.passed}/{len(t)} | {statistics.mean(t):+.3f} | "
                f"{statistics.median(t):+.3f} | {max(t):+.3f} | {t[0]:+.3f} | "
                f"{self.cpu_s / len(t):.3f} | {load} |")


def shim(root: Path, into: Path) -> Path:
    """A folder holding that checkout's `harness` package alone."""
    into.mkdir()
    (into / "harness").symlink_to(root / "harness", target_is_directory=True)
    return into


def plugin() -> list[str]:
    """pytest loads the plugin itself where harness is installed with its entry point."""
    names = {e.name for e in importlib.metadata.entry_points(group="pytest11")}
    return [] if "harness" in names else ["-p", "harness.pytest_plugin"]


def run(name: str, path: Path, tests: Path, budget: float) -> Run:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST_"))}
    env["PYTHONPATH"] = str(path)
    junit = tests.parent / f"{name}.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
           "no:benchmark", *plugin(), f"--junitxml={junit}", str(tests)]
    before, cpu = os.getloadavg()[0], resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=tests.parent, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    last = (done.stdout.strip().splitlines() or [""])[-1]
    if done.returncode not in (0, 1):
        print(f"plugin_cost: {name}: pytest exited {done.returncode}:\n"
              f"{(done.stdout + done.stderr)[-3000:]}", file=sys.stderr)
    cases = list(ElementTree.parse(junit).iter("testcase")) if junit.exists() else []
    times = [float(c.get("time") or 0.0) - budget for c in cases]
    passed = sum(1 for c in cases if not any(e.tag in ("failure", "error", "skipped")
                                             for e in c))
    print(f"  {name}: {wall:.1f} s, {last}", file=sys.stderr, flush=True)
    return Run(name, times, (after.ru_utime + after.ru_stime) - (cpu.ru_utime + cpu.ru_stime),
               (before, os.getloadavg()[0]), passed)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tests", type=int, default=40)
    ap.add_argument("--budget", default="0.5s")
    ap.add_argument("--before", type=Path, default=None,
                    help="another checkout (its root) to run alternately")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.tests, args.budget, args.before, args.rounds = 4, "0.2s", None, 1
    budget = float(args.budget.rstrip("s"))
    sides = [("this", ROOT)] + ([("before", args.before.resolve())] if args.before else [])
    with tempfile.TemporaryDirectory(prefix="plugin-cost-") as tmp:
        base = Path(tmp)
        tests = base / "tests"
        tests.mkdir()
        (tests / "test_trivial.py").write_text("import pytest\n" + "".join(
            TEST.format(budget=args.budget, n=n) for n in range(args.tests)))
        paths = {name: shim(root, base / f"path-{name}") for name, root in sides}
        runs: list[Run] = []
        for r in range(args.rounds):
            for name, _ in (sides if r % 2 == 0 else sides[::-1]):
                runs.append(run(name, paths[name], tests, budget))
    print(f"{args.tests} trivial tests, budget {args.budget}, {os.cpu_count()} CPUs; "
          "each test's time less the budget (s)")
    print("| run | passed | mean | median | max | first | CPU s a test | load |")
    print("|---|---|---|---|---|---|---|---|")
    for r in runs:
        print(r.row())
    return 0


if __name__ == "__main__":
    sys.exit(main())
