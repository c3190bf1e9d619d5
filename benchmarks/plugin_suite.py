"""What a marked test costs beyond its budget (issue 62): a real library's own test suite,
every plain test marked, run by pytest with harness's plugin and with pytest-memray.

The suite is opt_einsum 3.4.0's (pure Python over numpy; its tests ship in its wheel),
less test_contract.py (7,482 parametrized cases): about 250 tests that run, 150 that
skip. It runs in a venv that harness's local runtime builds and caches (opt_einsum,
numpy, pytest-memray, which brings pytest); harness is not installed into it: its source
is put first on PYTHONPATH and its dependencies found in this interpreter's
site-packages after the venv's own (as benchmarks/plugin_vs_memray.py does). The test
files are copied into a temporary folder beside a conftest.py that marks every
module-level test function (a method of a class is refused by harness's plugin):

- plain: no marker, neither plugin;
- harness: `@pytest.mark.harness_leaks(budget=B)` (`-p harness.pytest_plugin -p no:memray`),
  with this checkout's harness and, with `--before ROOT`, another checkout's (main's)
  as well, the two alternated `--rounds` times so the machine's load falls on both;
- pytest-memray: `@pytest.mark.limit_leaks("16 KB")` (`--memray -p no:harness`,
  PYTHONMALLOC=malloc), one call of each test as its docs have it.

Per run: the tests that ran (passed + failed), the pytest process's wall time, and the
cost of a marked test beyond its budget: (wall - plain wall) / tests - budget (a
harness run can stop before its budget, once its verdict is sure, and run again
longer where it is not: both counted); and from junit-xml, each test that ran (not one
that skipped itself) less the budget: mean, median, max.
The load average is printed beside each run.
`--quick` (CI): the 2 tests of one small test file that `-k` QUICK_TESTS picks, budget
0.2 s, this checkout only; where the venv cannot be built (no package index) it says so
and exits 0.

Run: PYTHONPATH=. python benchmarks/plugin_suite.py [--budget 0.5s] [--before ROOT]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.errors import HarnessError  # noqa: E402
from harness.matrixfile.model import ImageSpec  # noqa: E402
from harness.runtimes.local import LocalRuntime  # noqa: E402

REQUIREMENTS = ("opt_einsum==3.4.0", "numpy==1.26.4", "pytest-memray==1.11.0")
LEFT_OUT = ("test_contract.py",)
QUICK_FILES = ("test_edge_cases.py",)
# -k: 2 of its 11 tests (a mean, a median and a max of more than one)
QUICK_TESTS = "test_broadcasting_contraction3 or test_broadcasting_contraction4"
BUDGET, QUICK_BUDGET = "0.5s", "0.2s"
MEMRAY_LIMIT = "16 KB"
TIMEOUT_S = 3600
UNAVAILABLE = 3
MARK_ENV, BUDGET_ENV, HOST_ENV = "PSUITE_MARK", "PSUITE_BUDGET", "PSUITE_HOST_PATH"

CONFTEST = f'''import importlib.machinery
import os
import sys

import pytest

_HOST = [p for p in os.environ.get("{HOST_ENV}", "").split(os.pathsep) if p]


class _HostDependencies:
    """harness's dependencies from the host interpreter, where the venv has none."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if path is not None or not _HOST:
            return None
        return importlib.machinery.PathFinder.find_spec(name, _HOST)


sys.meta_path.append(_HostDependencies)


def pytest_collection_modifyitems(items):
    mark = os.environ.get("{MARK_ENV}")
    for item in items:
        if not isinstance(item, pytest.Function) or item.cls is not None:
            continue
        if mark == "harness":
            item.add_marker(pytest.mark.harness_leaks(budget=os.environ["{BUDGET_ENV}"]))
        elif mark == "memray":
            item.add_marker(pytest.mark.limit_leaks({MEMRAY_LIMIT!r}))
'''

INI = """[pytest]
markers =
    harness_leaks: harness's leak check (the other runs leave harness out)
    limit_leaks: pytest-memray's leak check (the other runs leave pytest-memray out)
"""

SUMMARY = re.compile(r"(\d+) (passed|failed|skipped|error|errors|xfailed|xpassed)")


@dataclass
class Run:
    name: str
    wall_s: float
    counts: dict[str, int]
    load: tuple[float, float]   # 1-minute load average before and after
    calls: tuple[float, ...] = ()   # each test that ran: its time (s), as junit-xml has it
    undecided: int = 0      # tests that passed undecided, with harness's warning

    @property
    def tests(self) -> int:
        return self.counts.get("passed", 0) + self.counts.get("failed", 0)


def venv_python() -> Path:
    """The suite's venv (built once, cached by harness's local runtime).

    Raises:
        HarnessError: it cannot be built (no package index).
    """
    spec = ImageSpec("opt-einsum-suite", "python3", 0, REQUIREMENTS)
    return Path(LocalRuntime().prepare(spec, lambda _: None).python or "python3")


def host_paths() -> str:
    paths = sysconfig.get_paths()
    return os.pathsep.join(dict.fromkeys([paths["purelib"], paths["platlib"]]))


def suite(python: Path, into: Path, quick: bool) -> Path:
    """The venv's opt_einsum tests copied into `into`, with the conftest that marks."""
    out = subprocess.run([str(python), "-c", "import opt_einsum, os; print(os.path.dirname("
                          "opt_einsum.__file__))"], capture_output=True, text=True,
                         check=True)
    source = Path(out.stdout.strip()) / "tests"
    tests = into / "tests"
    tests.mkdir()
    for path in sorted(source.glob("test_*.py")):
        if path.name not in LEFT_OUT and (not quick or path.name in QUICK_FILES):
            shutil.copy(path, tests / path.name)
    (tests / "conftest.py").write_text(CONFTEST)
    (tests / "pytest.ini").write_text(INI)
    return tests


def shim(harness_root: Path, into: Path) -> Path:
    """A folder holding that checkout's `harness` package alone."""
    into.mkdir()
    (into / "harness").symlink_to(harness_root / "harness", target_is_directory=True)
    return into


def run(name: str, python: Path, tests: Path, mark: str, budget: str,
        path: Path | None, pick: tuple[str, ...] = (), keep: Path | None = None) -> Run:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "PSUITE_", "MEMRAY_", "PYTEST_"))}
    env |= {MARK_ENV: mark, BUDGET_ENV: budget}
    flags = ["-p", "no:memray", "-p", "no:harness"]
    if mark == "harness":
        assert path is not None
        env |= {"PYTHONPATH": str(path), HOST_ENV: host_paths()}
        flags = ["-p", "harness.pytest_plugin", "-p", "no:memray"]
    elif mark == "memray":
        env |= {"PYTHONMALLOC": "malloc"}
        flags = ["--memray", "-p", "no:harness"]
    junit = tests.parent / f"{mark}-junit.xml"
    cmd = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
           *flags, *pick, "."]
    before = os.getloadavg()[0]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=tests, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    wall = time.perf_counter() - t0
    last = (done.stdout.strip().splitlines() or [""])[-1]
    counts = {k.rstrip("s") if k.startswith("error") else k: int(n)
              for n, k in SUMMARY.findall(last)}
    if done.returncode not in (0, 1) or not counts:
        print(f"plugin_suite: {name}: pytest exited {done.returncode}:\n"
              f"{(done.stdout + done.stderr)[-3000:]}", file=sys.stderr)
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        runs = len(list(keep.glob("*.xml")))
        shutil.copy(junit, keep / f"{runs:02d}-{re.sub(r'[^a-z]+', '-', name)}.xml")
    got = Run(name, wall, counts, (before, os.getloadavg()[0]), ran_times(junit),
              done.stdout.count("harness: undecided, passed"))
    print(f"  {name}: {wall:.1f} s, {last}", file=sys.stderr, flush=True)
    if mark == "harness":   # the harness summary's failures, as harness words them
        for line in done.stdout.splitlines():
            if line.startswith("FAILED ") and ": " in line:
                print(f"    {line[:400]}", file=sys.stderr)
    return got


def ran_times(junit: Path) -> tuple[float, ...]:
    """Each test that ran (passed or failed, not skipped): its setup, call and teardown
    time as junit-xml has it."""
    try:
        root = ElementTree.parse(junit).getroot()
    except (OSError, ElementTree.ParseError):
        return ()
    return tuple(float(case.get("time") or 0) for case in root.iter("testcase")
                 if case.find("skipped") is None)


def seconds(budget: str) -> float:
    from harness.matrixfile.entries import parse_duration

    value = parse_duration(budget)
    if value is None:
        raise SystemExit(f"plugin_suite: --budget {budget!r} is not a duration")
    return value


def table(runs: list[Run], plain: Run, budget_s: float) -> list[str]:
    out = ["| run | tests | passed / failed | budget | wall | per test | beyond the "
           "budget, per test | a test that ran, beyond the budget: mean, median, max | "
           "passed undecided | load (1 min) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        n = max(r.tests, 1)
        marked = r.name.startswith("harness")
        extra = (r.wall_s - plain.wall_s) / n - (budget_s if marked else 0.0)
        beyond = [c - (budget_s if marked else 0.0) for c in r.calls]
        calls = (f"{statistics.mean(beyond):+.3f}, {statistics.median(beyond):+.3f}, "
                 f"{max(beyond):+.3f} s" if beyond and r is not plain else "-")
        out.append(f"| {r.name} | {r.tests} | {r.counts.get('passed', 0)} / "
                   f"{r.counts.get('failed', 0)} | {f'{budget_s:g} s' if marked else '-'} | "
                   f"{r.wall_s:.1f} s | {r.wall_s / n:.3f} s | "
                   f"{'-' if r is plain else f'{extra:+.3f} s'} | {calls} | "
                   f"{r.undecided if marked else '-'} | "
                   f"{r.load[0]:.1f} -> {r.load[1]:.1f} |")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help=f"CI: {', '.join(QUICK_FILES)} -k {QUICK_TESTS}, budget "
                        f"{QUICK_BUDGET}; skipped (exit 0) where the venv cannot be built")
    p.add_argument("--budget", default=None,
                   help=f"harness_leaks's budget (default {BUDGET}, --quick {QUICK_BUDGET})")
    p.add_argument("--before", metavar="ROOT", type=Path, default=None,
                   help="another checkout (main) whose harness runs too, alternated "
                        "with this one's")
    p.add_argument("--rounds", type=int, default=1,
                   help="harness runs of each checkout, alternated (default 1)")
    p.add_argument("--no-memray", action="store_true", help="leave pytest-memray out")
    p.add_argument("--keep", metavar="DIR", type=Path, default=None,
                   help="copy each run's junit-xml (each test's time) into DIR")
    args = p.parse_args(argv)
    budget = args.budget or (QUICK_BUDGET if args.quick else BUDGET)
    budget_s = seconds(budget)
    try:
        python = venv_python()
    except HarnessError as exc:
        print(f"plugin_suite: skipped: the suite's venv ({' '.join(REQUIREMENTS)}) cannot "
              f"be built: {str(exc).splitlines()[0][:300]}")
        return 0 if args.quick else UNAVAILABLE
    with tempfile.TemporaryDirectory(prefix="plugin-suite-") as tmp:
        work = Path(tmp)
        tests = suite(python, work, args.quick)
        checkouts = {"harness": shim(ROOT, work / "after")}
        if args.before is not None:
            checkouts = {"harness before": shim(args.before.resolve(), work / "before"),
                         "harness after": checkouts["harness"]}
        pick = ("-k", QUICK_TESTS) if args.quick else ()
        plain = run("plain", python, tests, "plain", budget, None, pick, args.keep)
        runs = [plain]
        for _ in range(max(args.rounds, 1)):
            for name, path in checkouts.items():
                runs.append(run(name, python, tests, "harness", budget, path, pick,
                                args.keep))
        if not args.no_memray:
            runs.append(run("pytest-memray", python, tests, "memray", budget, None, pick,
                                args.keep))
    quick = f" (--quick: {', '.join(QUICK_FILES)} -k {QUICK_TESTS})" if args.quick else ""
    print(f"opt_einsum 3.4.0's tests{quick}"
          f", less {', '.join(LEFT_OUT)}; every module-level test marked "
          f"harness_leaks(budget={budget!r}) or limit_leaks({MEMRAY_LIMIT!r}); one pytest "
          "process each, no xdist. 'beyond the budget': (wall - plain wall) / tests, "
          "less the budget for harness.\n")
    print("\n".join(table(runs, plain, budget_s)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
