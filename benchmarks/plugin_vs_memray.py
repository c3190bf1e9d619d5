"""harness's pytest plugin head to head with pytest-memray on the corpus's leaks and
controls (issue 52): one test file per case and release, marked for both plugins, run by
`python -m pytest` once per plugin in the release's venv.

For every leak and control of `benchmarks/corpus/` (slowdowns are left out: neither
marker is about time), and every release of it, a test file is written into a temporary
directory:

    STATE = scenario.setup(PARAMS)          # setup at import, outside the test

    @pytest.mark.harness_leaks(budget="5s")
    @pytest.mark.limit_leaks("16 KB")
    def test_<case>_<release>():
        for _ in range(LOOP):
            scenario.step(STATE)

Each plugin runs it as its docs say a leak test is written:

- harness (`-p harness.pytest_plugin -p no:memray`, LOOP=1): the test function is the
  step, which the plugin calls over and over in a child process (docs/pytest.md); the
  budget is the corpus runner's (5 s; `--quick`: 0.5 s);
- pytest-memray 1.11.0 (`--memray -p no:harness`, LOOP=1000 after 200 warm-up calls in
  a module fixture, PYTHONMALLOC=malloc): its docs ask for the code under test to run
  in a loop, and to allow "some small amount of leaked memory per call stack"; the limit
  and the counts are the corpus runner's (`corpuskit.drivers`: "16 KB" over 1000 calls
  after 200), so the verdicts match that table's.

(pytest-memray 1.11 tracks a test with a `limit_leaks` marker even without `--memray`,
and wraps any plugin's call of the test: the harness run turns it off, and the memray run
leaves harness out.)

The venv is the corpus's (`corpuskit.truth.venv_python`: built and cached by harness's
local runtime from `Case.requirements`, the package pinned plus psleak and pytest-memray,
which brings pytest). harness is not installed into it: its source is put first on
PYTHONPATH and its own dependencies (this interpreter's site-packages) appended after
the venv's, so every package the case pins is the venv's own.

Per release: pass / fail of the pytest process and the plugin's verdict, its wall time
(interpreter start to exit: pytest, the imports and the case's setup included). Totals
per plugin: recall (a leak's first bad release failed with a memory finding), false
alarms (a control's, a good or a fixed release's test failed), errors (the test failed
or errored for another reason: not counted as a finding), median and worst wall time
per test. `--quick` (CI): two cases (multidict_pop, control_lru_cache), the
bad (or control) release only, harness budget 0.5 s; where they cannot be built (no
package index: offline) it says so and exits 0 (skipped), the full run exits 3.

Run: PYTHONPATH=. python benchmarks/plugin_vs_memray.py [--case NAME] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import corpus  # noqa: E402
from corpuskit import drivers  # noqa: E402
from corpuskit.cases import Case, CaseError, load_all  # noqa: E402
from corpuskit.truth import venv_python  # noqa: E402

from harness.errors import HarnessError  # noqa: E402

QUICK = ("multidict_pop", "control_lru_cache")   # a leak's bad release, a control
PLUGINS = ("harness", "memray")
BUDGET, QUICK_BUDGET = "5s", "0.5s"
TIMEOUT_S = 900
UNAVAILABLE = 3
LOOP_ENV, WARM_ENV, HOST_ENV = "PVM_LOOP", "PVM_WARM", "PVM_HOST_PATH"

TEST = '''"""{title}: release {release} ({role}), the case's step as a test both plugins run."""
import importlib.util
import json
import os
import sys

import pytest

SCRIPT = {script!r}
PARAMS = json.loads({params!r})
sys.path.insert(0, os.path.dirname(SCRIPT))
_spec = importlib.util.spec_from_file_location("scenario", SCRIPT)
scenario = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scenario)
STATE = scenario.setup(PARAMS)      # once, at import: outside the measured calls
LOOP = int(os.environ.get("{loop}", "1"))


@pytest.fixture(scope="module", autouse=True)
def _warm_then_teardown():
    for _ in range(int(os.environ.get("{warm}", "0"))):
        scenario.step(STATE)
    yield
    if hasattr(scenario, "teardown"):
        scenario.teardown(STATE)


@pytest.mark.harness_leaks(budget={budget!r})
@pytest.mark.limit_leaks({limit!r})
def {name}():
    for _ in range(LOOP):
        scenario.step(STATE)
'''

# The harness run: harness's dependencies from this interpreter's site-packages, found
# only where the venv has no module of that name (a finder after the path's own), so the
# case's pinned packages win. Not a sys.path entry: the plugin hands the pytest process's
# sys.path to its child ahead of the child's own site-packages (harness.api.scenario),
# which would put this interpreter's msgspec or numpy before the release under test.
CONFTEST = f'''import importlib.machinery
import os
import sys

_HOST = [p for p in os.environ.get("{HOST_ENV}", "").split(os.pathsep) if p]


class _HostDependencies:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if path is not None or not _HOST:   # a submodule: its package's own path
            return None
        return importlib.machinery.PathFinder.find_spec(name, _HOST)


sys.meta_path.append(_HostDependencies)
'''

INI = """[pytest]
markers =
    harness_leaks: harness's leak check (the memray run leaves harness out)
    limit_leaks: pytest-memray's leak check (the harness run leaves pytest-memray out)
"""

HARNESS_LINE = re.compile(r"^(PASSED|FAILED) \S+: ([\w-]+) \(rule ", re.M)
MEMRAY_LEAK = "at least one location leaked more"


@dataclass
class Run:
    outcome: str        # "pass" | "fail" | "error" (pytest's exit status)
    verdict: str        # the plugin's word: harness's verdict; memray's "leak"/"stable"
    wall_s: float
    said: str = ""      # the output's tail where the run is an error


@dataclass
class Row:
    case: str
    kind: str
    release: str
    role: str
    bug: bool
    truth: str
    runs: dict[str, Run]


def found(row: Row, run: Run) -> bool:
    """The test failed on the case's bug with a memory finding: harness's memory verdict,
    pytest-memray's leak (the corpus runner's `found`)."""
    return run.outcome == "fail" and corpus.found(row.kind, run.verdict)


def alarm(run: Run) -> bool:
    """The test failed with a plugin's verdict (a red test a user would chase)."""
    return run.outcome == "fail" and run.verdict != "error"


def name_of_test(case: Case, release: str) -> str:
    return "test_" + re.sub(r"\W", "_", f"{case.slug}_{release}")


def write_test(case: Case, role: str, release: str, into: Path, budget: str) -> Path:
    name = name_of_test(case, release)
    path = into / f"{name}.py"
    path.write_text(TEST.format(
        title=case.title.replace('"', "'"), release=release, role=role,
        script=str(case.path), params=json.dumps(case.params), loop=LOOP_ENV,
        warm=WARM_ENV, budget=budget, limit=drivers.MEMRAY_LIMIT, name=name))
    return path


def base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("PYTHON", "PVM_", "MEMRAY_"))}


def host_paths() -> str:
    """This interpreter's site-packages: harness's dependencies for the venv's pytest."""
    paths = sysconfig.get_paths()
    return os.pathsep.join(dict.fromkeys([paths["purelib"], paths["platlib"]]))


def run_plugin(plugin: str, python: Path, test: Path, shim: Path) -> Run:
    """One pytest process of `test` in the venv of `python`, one plugin on."""
    env = base_env()
    if plugin == "harness":
        env |= {"PYTHONPATH": str(shim), HOST_ENV: host_paths(), LOOP_ENV: "1",
                WARM_ENV: "0"}
        flags = ["-p", "harness.pytest_plugin", "-p", "no:memray"]
    else:
        env |= {"PYTHONMALLOC": "malloc", LOOP_ENV: str(drivers.MEMRAY_CALLS),
                WARM_ENV: str(drivers.MEMRAY_WARM)}
        flags = ["--memray", "-p", "no:harness"]
    cmd = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *flags, test.name]
    t0 = time.perf_counter()
    try:
        got = subprocess.run(cmd, cwd=test.parent, env=env, capture_output=True, text=True,
                             timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return Run("error", "timeout", time.perf_counter() - t0, f"ran past {TIMEOUT_S} s")
    wall = time.perf_counter() - t0
    out = got.stdout + got.stderr
    outcome = {0: "pass", 1: "fail"}.get(got.returncode, "error")
    if plugin == "harness":
        line = HARNESS_LINE.search(got.stdout)
        verdict = line.group(2) if line else "error"
    else:
        verdict = ("leak" if MEMRAY_LEAK in out else "stable" if outcome == "pass"
                   else "error")
    if outcome == "pass" and verdict == "error":
        verdict = "?"           # passed without the plugin's line: said in the table
    return Run(outcome, verdict, wall, out[-1500:] if verdict in ("error", "?") else "")


def releases(case: Case, quick: bool) -> list[tuple[str, str]]:
    pairs = case.releases()
    if quick:       # the release with the bug (a control's one release) only
        pairs = [(r, v) for r, v in pairs if r == ("good" if case.kind == "control"
                                                   else "bad")]
    return pairs


def measure(cases: list[Case], work: Path, budget: str, quick: bool
            ) -> tuple[list[Row], list[str]]:
    tests = work / "tests"
    tests.mkdir()
    (tests / "pytest.ini").write_text(INI)
    (tests / "conftest.py").write_text(CONFTEST)
    shim = work / "path"            # harness's source alone: no other folder of the repo
    shim.mkdir()
    (shim / "harness").symlink_to(ROOT / "harness", target_is_directory=True)
    rows: list[Row] = []
    unbuilt: list[str] = []
    started = time.perf_counter()
    for case in cases:
        for role, release in releases(case, quick):
            try:
                python = venv_python(case, release)
            except HarnessError as exc:
                unbuilt.append(f"{case.slug} {release}: {str(exc).splitlines()[0][:300]}")
                continue
            test = write_test(case, role, release, tests, budget)
            runs = {p: run_plugin(p, python, test, shim) for p in PLUGINS}
            rows.append(Row(case.slug, case.kind, release, role, case.bad_release(role),
                            corpus.truth_text(case, release), runs))
            print(f"  {case.slug} {release}: " + ", ".join(
                f"{p} {r.outcome} {r.verdict} {r.wall_s:.1f} s" for p, r in runs.items())
                + f" ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
    return rows, unbuilt


def cell(plugin: str, row: Row) -> str:
    run = row.runs[plugin]
    right = found(row, run) if row.bug else not alarm(run) and run.outcome != "error"
    return f"{run.outcome} {run.verdict} {'✓' if right else '✗'} ({run.wall_s:.1f} s)"


def table(rows: list[Row]) -> list[str]:
    out = ["| case | release | truth | harness_leaks | memray limit_leaks |",
           "|---|---|---|---|---|"]
    for r in rows:
        role = r.role + (" (first bad)" if r.bug else "")
        out.append(f"| {r.case} | {r.release} {role} | {r.truth} | {cell('harness', r)} | "
                   f"{cell('memray', r)} |")
    return out


def totals(rows: list[Row], plugin: str) -> dict[str, object]:
    runs = [(r, r.runs[plugin]) for r in rows]
    bugs = [(r, g) for r, g in runs if r.bug]
    clean = [(r, g) for r, g in runs if not r.bug]
    walls = [g.wall_s for _, g in runs]
    return {"recall": f"{sum(found(r, g) for r, g in bugs)}/{len(bugs)}",
            "false_alarms": f"{sum(alarm(g) for _, g in clean)}/{len(clean)}",
            "errors": f"{sum(g.outcome == 'error' or g.verdict in ('error', '?') for _, g in runs)}"
                      f"/{len(runs)}",
            "wall_median_s": round(statistics.median(walls), 1) if walls else None,
            "wall_worst_s": round(max(walls), 1) if walls else None,
            "wall_total_s": round(sum(walls), 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--case", action="append", default=[],
                   help="only cases whose file name contains NAME (repeatable)")
    p.add_argument("--quick", action="store_true",
                   help=f"CI: {', '.join(QUICK)}, bad/control release, budget "
                        f"{QUICK_BUDGET}; skipped (exit 0) where the venvs cannot be built")
    p.add_argument("--budget", default=None,
                   help=f"harness_leaks's budget (default {BUDGET}, --quick {QUICK_BUDGET})")
    p.add_argument("--json", metavar="OUT", type=Path, help="write every row here")
    args = p.parse_args(argv)
    try:
        cases = [c for c in load_all(args.case or (list(QUICK) if args.quick else None))
                 if c.kind != "slowdown"]
    except CaseError as exc:
        print(f"plugin_vs_memray: {exc}", file=sys.stderr)
        return 2
    if not cases:
        p.error(f"--case {args.case} names no leak or control under benchmarks/corpus/")
    budget = args.budget or (QUICK_BUDGET if args.quick else BUDGET)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="plugin-vs-memray-") as tmp:
        rows, unbuilt = measure(cases, Path(tmp), budget, args.quick)
    wall = time.perf_counter() - started
    for u in unbuilt:
        print(f"plugin_vs_memray: no venv for {u}", file=sys.stderr)
    if unbuilt and rows:
        print(f"skipped {len(unbuilt)} release(s) whose venv could not be built (a package "
              "index is needed the first time): " + "; ".join(u.split(":")[0]
                                                             for u in unbuilt) + "\n")
    if not rows:
        print("plugin_vs_memray: skipped: no case's venv could be built (a package index "
              "is needed the first time: pip/uv install the pinned releases, pytest-memray "
              "and psleak; cached under harness's cache afterwards)")
        return 0 if args.quick else UNAVAILABLE
    print(f"{len(rows)} releases of {len(cases)} cases; harness_leaks(budget={budget!r}) "
          f"and limit_leaks({drivers.MEMRAY_LIMIT!r}) over {drivers.MEMRAY_CALLS} calls "
          f"after {drivers.MEMRAY_WARM}. Cells: pytest's outcome, the plugin's verdict, "
          "✓/✗ against the truth, the pytest process's wall time.\n")
    print("\n".join(table(rows)))
    print()
    summary = {p: totals(rows, p) for p in PLUGINS}
    for plugin, t in summary.items():
        print(f"{plugin}: recall {t['recall']}, false alarms {t['false_alarms']}, errors "
              f"{t['errors']}, wall time per test median {t['wall_median_s']} s, worst "
              f"{t['wall_worst_s']} s, total {t['wall_total_s']} s")
    print(f"wall time {wall:.0f} s")
    for r in rows:
        for plugin, run in r.runs.items():
            if run.said:
                print(f"plugin_vs_memray: {r.case} {r.release} {plugin}: {run.outcome} "
                      f"{run.verdict}:\n{run.said}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps({"rows": [asdict(r) for r in rows],
                                         "totals": summary, "unbuilt": unbuilt,
                                         "wall_s": wall}, indent=1))
    if unbuilt and not args.quick:
        return UNAVAILABLE
    return 0


if __name__ == "__main__":
    sys.exit(main())
