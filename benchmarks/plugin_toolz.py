"""harness's pytest plugin on a suite it has never seen (issue 86): toolz 1.1.0's own
tests (they ship in its wheel, under toolz/tests/ and toolz/sandbox/tests/), judged
against a truth measured without harness.

The wheel (`pip download toolz==1.1.0 --no-deps`) is unpacked into a temporary folder put
on PYTHONPATH, the test files copied flat into another beside a conftest.py that marks each
module-level test function; methods of classes (TestDict and its two subclasses), which
the plugin refuses, stay unmarked and run as plain tests, counted apart.

1. truth: each test file in a fresh subprocess, its tests collected by pytest (`-p
   no:harness`); each module-level test whose required arguments are all parametrize's
   (else "fixtures": not called) called N times (--truth-calls, 5000) after 50 warm-up
   calls, tracemalloc started then; gc.collect(), then traced memory read at calls N/5,
   N/2, N. grows: it rose from N/2 to N by > 64 KiB and > 16 B/call; levels: not that, and
   it rose by > 64 KiB before N/5; flat: neither; error: a call raised. To truth.json
   beside --json. The command, in the copied tests' folder, PYTHONPATH=<unpacked wheel>:
   python benchmarks/plugin_toolz.py --truth-child test_x.py --truth-calls N --out F.json
2. two runs with `harness_leaks(budget=B)` (`-p no:memray -p no:cacheprovider -rA
   --junitxml`), one pytest process each, no xdist: per test its outcome, harness's words
   (junit-xml property "harness", else the failure's message), whether it passed with the
   "harness: undecided, passed" PytestWarning; the "harness: " lines of its summary.
3. where pytest-memray installs (`pip install --no-deps --target`: pytest-memray, memray;
   not textual, which only memray's live viewer needs): `limit_leaks("16 KB")`,
   `--memray -p no:harness`, PYTHONMALLOC=malloc.

Printed: per run, the counts against truth, undecided warnings, wall time, a marked
test's mean junit-xml time beyond its budget, the load average; what differs between the
harness runs; each test that disagrees with truth (failed and not "grows", or passed and
"grows") or between runs. All of it to --json, each run's output beside it.
`--quick` (CI): test_recipes.py's 2 tests, budget 0.2 s, 1000 truth calls; where toolz
cannot be had it says so and exits 0.

Run: PYTHONPATH=. python benchmarks/plugin_toolz.py [--budget 0.5s] [--truth-calls 5000]
     [--json FILE] [--no-memray] [--quick]
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

ROOT = Path(__file__).resolve().parents[1]
TOOLZ, MEMRAY, QUICK_FILES = "toolz==1.1.0", ("pytest-memray", "memray"), ("test_recipes.py",)
BUDGET, QUICK_BUDGET, CALLS, QUICK_CALLS, WARMUP = "0.5s", "0.2s", 5000, 1000, 50
KIB64, PER_CALL, TIMEOUT_S, UNAVAILABLE = 64 * 1024, 16.0, 3600, 3
MEMRAY_LIMIT, MARK_ENV, BUDGET_ENV = "16 KB", "PTOOLZ_MARK", "PTOOLZ_BUDGET"
UNDECIDED_WARNING = "harness: undecided, passed"
SECTION = re.compile(r"^=+ (.+?) =+$")
VERDICT = re.compile(r"(?:harness: )?(runs once only(?=:)|[a-z-]+(?= \(rule ))")

CONFTEST = f'''import os

import pytest


def pytest_collection_modifyitems(items):
    marker = {{"harness": pytest.mark.harness_leaks(budget=os.environ.get("{BUDGET_ENV}")),
              "memray": pytest.mark.limit_leaks({MEMRAY_LIMIT!r})}}.get(
                  os.environ.get("{MARK_ENV}"))
    for item in items:
        if marker is not None and isinstance(item, pytest.Function) and item.cls is None:
            item.add_marker(marker)
'''
INI = ("[pytest]\nmarkers =\n    harness_leaks: harness's leak check\n"
       "    limit_leaks: pytest-memray's leak check\n")


@dataclass
class Test:
    outcome: str            # passed, failed, skipped
    marked: bool            # a module-level function (a method of a class: unmarked)
    seconds: float          # junit-xml's: setup, call and teardown
    words: str = ""         # harness's text, else the failure's message
    verdict: str = "-"      # its verdict word; "other" for words without one
    undecided: bool = False


@dataclass
class Run:
    name: str
    wall_s: float
    load: tuple[float, ...]     # 1- and 5-minute load averages, before and after
    tests: dict[str, Test]
    summary: list[str] = field(default_factory=list)   # the "harness: " lines
    rc: int = 0


def measure_file(file: str, calls: int, out: Path) -> None:
    """The truth child: `file`'s module-level tests, each called `calls` times."""
    import pytest

    found: list[pytest.Function] = []

    class Grab:
        def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
            found.extend(i for i in items if isinstance(i, pytest.Function))

    pytest.main(["--collect-only", "-q", "-p", "no:harness", "-p", "no:memray", "-p",
                 "no:cacheprovider", file], plugins=[Grab()])
    got: dict[str, dict[str, Any]] = {}
    for item in (i for i in found if i.cls is None):
        given = dict(item.callspec.params) if hasattr(item, "callspec") else {}
        params = inspect.signature(item.obj).parameters
        missing = [n for n, p in params.items() if p.default is p.empty and n not in given
                   and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        got[item.nodeid] = (
            {"class": "fixtures", "why": f"takes {', '.join(missing)}"} if missing else
            call_often(item.obj, {n: v for n, v in given.items() if n in params}, calls))
    out.write_text(json.dumps(got))


def call_often(fn: Any, kwargs: dict[str, Any], calls: int) -> dict[str, Any]:
    import pytest

    marks, read, t0 = (calls // 5, calls // 2, calls), [], time.perf_counter()
    try:
        for i in range(1 - WARMUP, calls + 1):      # i <= 0: the warm-up
            if i == 1:
                gc.collect()
                tracemalloc.start()
                read.append(tracemalloc.get_traced_memory()[0])
            fn(**kwargs)
            if i in marks:
                gc.collect()
                read.append(tracemalloc.get_traced_memory()[0])
    except (Exception, pytest.skip.Exception, pytest.fail.Exception) as exc:
        return {"class": "error", "why": f"{type(exc).__name__}: {exc}"[:300], "call": i}
    finally:
        tracemalloc.stop()
    late = read[3] - read[2]
    per_call = late / max(marks[2] - marks[1], 1)
    cls = ("grows" if late > KIB64 and per_call > PER_CALL
           else "levels" if read[1] - read[0] > KIB64 else "flat")
    return {"class": cls, "bytes_per_call": round(per_call, 1), "traced": read,
            "at_calls": [0, *marks], "seconds": round(time.perf_counter() - t0, 2)}


def env_with(paths: list[Path], **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "PTOOLZ_", "MEMRAY_", "PYTEST_"))}
    return env | {"PYTHONPATH": os.pathsep.join(map(str, paths))} | more


def load() -> tuple[float, float]:
    return os.getloadavg()[:2]


def truth(tests: Path, site: Path, calls: int) -> dict[str, dict[str, Any]]:
    """Each test file's tests measured in a fresh subprocess (`measure_file`)."""
    got: dict[str, dict[str, Any]] = {}
    for path in sorted(tests.glob("test_*.py")):
        out, before, t0 = tests.parent / f"truth-{path.stem}.json", load(), time.perf_counter()
        done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--truth-child",
                               path.name, "--truth-calls", str(calls), "--out", str(out)],
                              cwd=tests, env=env_with([site]), capture_output=True, text=True,
                              timeout=TIMEOUT_S)
        if done.returncode != 0 or not out.exists():
            print(f"  truth {path.name}: exited {done.returncode}: "
                  f"{(done.stdout + done.stderr)[-1500:]}", file=sys.stderr)
            continue
        got |= (part := json.loads(out.read_text()))
        print(f"  truth {path.name}: {len(part)} tests, {time.perf_counter() - t0:.0f} s, "
              f"load {before[0]:.1f} -> {load()[0]:.1f}", file=sys.stderr, flush=True)
    return got


def pip(*args: str) -> str | None:
    """Runs pip; None where it worked, else its last line."""
    done = subprocess.run([sys.executable, "-m", "pip", "-q", *args], capture_output=True,
                          text=True)
    lines = (done.stdout + done.stderr).strip().splitlines()
    return None if done.returncode == 0 else (lines or ["no output"])[-1][:300]


def suite(work: Path, quick: bool) -> tuple[Path, Path] | str:
    """(the unpacked wheel, the copied tests' folder), or why toolz cannot be had."""
    problem = pip("download", TOOLZ, "--no-deps", "-d", str(work / "wheel"))
    wheels = sorted((work / "wheel").glob("toolz-*.whl"))
    if problem or not wheels:
        return problem or "no wheel"
    site, tests = work / "site", work / "tests"
    with zipfile.ZipFile(wheels[0]) as whl:
        whl.extractall(site)
    tests.mkdir()
    for source in (site / "toolz" / "tests", site / "toolz" / "sandbox" / "tests"):
        for path in sorted(source.glob("test_*.py")):
            if (tests / path.name).exists():
                raise SystemExit(f"plugin_toolz: two test files named {path.name}")
            if not quick or path.name in QUICK_FILES:
                shutil.copy(path, tests / path.name)
    (tests / "conftest.py").write_text(CONFTEST)
    (tests / "pytest.ini").write_text(INI)
    return site, tests


def memray_site(work: Path) -> Path | str:
    """pytest-memray installed apart, or why not."""
    where = work / "memray"
    problem = pip("install", "--no-deps", "--target", str(where), *MEMRAY)
    if problem is None:
        check = subprocess.run([sys.executable, "-c", "import pytest_memray.plugin"],
                               env=env_with([where]), capture_output=True, text=True)
        problem = check.stderr.strip().splitlines()[-1] if check.returncode else None
    return where if problem is None else problem


def run(name: str, tests: Path, paths: list[Path], mark: str, budget: str, keep: Path) -> Run:
    """One pytest process over the copied tests; its output kept as keep/NAME.out."""
    env = env_with(paths, **{MARK_ENV: mark, BUDGET_ENV: budget})
    flags = ["-p", "no:memray"]
    if mark == "memray":
        env |= {"PYTHONMALLOC": "malloc"}
        flags = ["--memray", "-p", "no:harness"]
    junit = tests.parent / f"{name.replace(' ', '-')}.xml"
    before, t0 = load(), time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider",
                           f"--junitxml={junit}", *flags, "."], cwd=tests, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    wall = time.perf_counter() - t0
    (keep / f"{junit.stem}.out").write_text(done.stdout + done.stderr)
    summary, undecided = terminal(done.stdout)
    got = Run(name, wall, (*before, *load()), from_junit(junit), summary, done.returncode)
    for nodeid in undecided & got.tests.keys():
        got.tests[nodeid].undecided = True
    last = (done.stdout.strip().splitlines() or [""])[-1].strip("= ")
    print(f"  {name}: {wall:.1f} s, {last}, load {before[0]:.1f} -> {load()[0]:.1f}",
          file=sys.stderr, flush=True)
    return got


def terminal(stdout: str) -> tuple[list[str], set[str]]:
    """The "harness: " lines of the "harness" section; the node ids that the warnings
    summary lists above harness's undecided warning."""
    section, summary, undecided, below = "", [], set(), False
    ids: list[str] = []
    for line in filter(str.strip, stdout.splitlines()):
        head = SECTION.match(line)
        if head:
            section = head.group(1)
        elif section == "harness" and line.startswith("harness: "):
            summary.append(line)
        elif section == "warnings summary" and not line.startswith(" "):
            ids, below = ([] if below else ids) + [line.strip()], False
        elif section == "warnings summary":
            below = True
            if UNDECIDED_WARNING in line:
                undecided.update(ids)
    return summary, undecided


def from_junit(junit: Path) -> dict[str, Test]:
    try:
        root = ElementTree.parse(junit).getroot()
    except (OSError, ElementTree.ParseError):
        return {}
    got = {}
    for case in root.iter("testcase"):
        module, _, cls = (case.get("classname") or "").partition(".")
        nodeid = "::".join([f"{module}.py", *([cls] if cls else []), case.get("name") or ""])
        bad = case.find("failure")
        bad = case.find("error") if bad is None else bad
        words = [p.get("value") or "" for p in case.iter("property")
                 if p.get("name") == "harness"] or [bad.get("message") or ""
                                                    if bad is not None else ""]
        outcome = ("failed" if bad is not None else
                   "skipped" if case.find("skipped") is not None else "passed")
        verdict = VERDICT.match(words[0])
        got[nodeid] = Test(outcome, not cls, float(case.get("time") or 0), words[0][:1000],
                           verdict.group(1) if verdict else "other" if words[0] else "-")
    return got


def table(runs: list[Run], truth_of: dict[str, dict[str, Any]], budget_s: float
          ) -> tuple[list[str], list[str]]:
    """The table's lines; each test that disagrees with truth, in a line."""
    out = ["| run | marked tests run | passed / failed | failed: grows / levels / flat / "
           "other | passed, truth grows | undecided (on flat) | wall | mean beyond budget "
           "| unmarked passed / failed | load 1m, 5m before -> after |", "|---" * 10 + "|"]
    odd: list[str] = []
    for r in runs:
        ran = {k: t for k, t in r.tests.items() if t.marked and t.outcome != "skipped"}
        cls = {k: truth_of.get(k, {}).get("class", "none") for k in ran}
        failed = {k for k, t in ran.items() if t.outcome == "failed"}
        by = [sum(1 for k in failed if cls[k] == c) for c in ("grows", "levels", "flat")]
        missed = [k for k in ran if k not in failed and cls[k] == "grows"]
        und = [k for k, t in ran.items() if t.undecided]
        beyond = sum(t.seconds for t in ran.values()) / max(len(ran), 1) - (
            budget_s if r.name.startswith("harness") else 0.0)
        plain = [t.outcome for t in r.tests.values() if not t.marked]
        out.append(f"| {r.name} | {len(ran)} | {len(ran) - len(failed)} / {len(failed)} | "
                   f"{' / '.join(map(str, by))} / {len(failed) - sum(by)} | {len(missed)} | "
                   f"{len(und)} ({sum(1 for k in und if cls[k] == 'flat')}) | "
                   f"{r.wall_s:.1f} s | {beyond:+.3f} s | {plain.count('passed')} / "
                   f"{plain.count('failed')} | {r.load[0]:.1f}, {r.load[1]:.1f} -> "
                   f"{r.load[2]:.1f}, {r.load[3]:.1f} |")
        for k in sorted(k for k in failed if cls[k] != "grows") + missed:
            odd.append(f"{r.name}: {k}: {ran[k].outcome}, truth {cls[k]} "
                       f"({truth_of.get(k, {}).get('bytes_per_call', '-')} B/call): "
                       f"{ran[k].words[:300]}")
    return out, odd


def stability(a: Run, b: Run) -> tuple[dict[str, list[str]], list[str]]:
    """The marked tests whose outcome, or verdict word, differs between two runs."""
    both = [k for k, t in a.tests.items() if t.marked and k in b.tests]
    got = {"outcome_differs": [k for k in both if a.tests[k].outcome != b.tests[k].outcome],
           "verdict_differs": [k for k in both if a.tests[k].verdict != b.tests[k].verdict]}
    odd = [f"between runs: {k}: {a.tests[k].outcome} {a.tests[k].verdict} vs "
           f"{b.tests[k].outcome} {b.tests[k].verdict}" for k in both
           if k in got["outcome_differs"] or k in got["verdict_differs"]]
    return got, [f"between {a.name} and {b.name}: pass/fail differs for "
                 f"{len(got['outcome_differs'])}, verdict word for "
                 f"{len(got['verdict_differs'])} of {len(both)} marked tests", *odd]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--quick", action="store_true", help=f"CI: {', '.join(QUICK_FILES)}, "
                   f"budget {QUICK_BUDGET}, {QUICK_CALLS} truth calls")
    p.add_argument("--budget", help=f"harness_leaks's budget (default {BUDGET})")
    p.add_argument("--truth-calls", type=int, help=f"calls of each test (default {CALLS})")
    p.add_argument("--no-memray", action="store_true", help="leave pytest-memray out")
    p.add_argument("--json", type=Path, help="the results; truth.json, runs' output beside",
                   default=Path(tempfile.gettempdir()) / "plugin_toolz" / "result.json")
    p.add_argument("--truth-child", help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    calls = args.truth_calls or (QUICK_CALLS if args.quick else CALLS)
    if args.truth_child:
        measure_file(args.truth_child, calls, args.out)
        return 0
    sys.path.insert(0, str(ROOT))
    from harness.matrixfile.entries import parse_duration

    budget = args.budget or (QUICK_BUDGET if args.quick else BUDGET)
    if (budget_s := parse_duration(budget)) is None:
        raise SystemExit(f"plugin_toolz: --budget {budget!r} is not a duration")
    keep = args.json.parent
    keep.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="plugin-toolz-") as tmp:
        got = suite(Path(tmp), args.quick)
        if isinstance(got, str):
            print(f"plugin_toolz: skipped: {TOOLZ} cannot be had: {got}")
            return 0 if args.quick else UNAVAILABLE
        site, tests = got
        truth_of = truth(tests, site, calls)
        (keep / "truth.json").write_text(json.dumps(truth_of, indent=1))
        runs = [run(f"harness {i}", tests, [ROOT, site], "harness", budget, keep)
                for i in (1, 2)]
        memray = "--no-memray" if args.no_memray else memray_site(Path(tmp))
        if isinstance(memray, Path):
            runs.append(run("pytest-memray", tests, [memray, site], "memray", budget, keep))
        else:
            notes.append(f"pytest-memray left out: {memray}")
    lines, odd = table(runs, truth_of, budget_s)
    stable, between = stability(runs[0], runs[1])
    classes = [v["class"] for v in truth_of.values()]
    notes += [f"truth: {', '.join(f'{c} {classes.count(c)}' for c in sorted(set(classes)))}",
              *(f"truth: {k}: {v['class']}: {v.get('why')}" for k, v in truth_of.items()
                if v["class"] in ("error", "fixtures")),
              *(f"{r.name}: pytest exited {r.rc}" for r in runs if r.rc not in (0, 1)),
              *(f"{r.name}: {s}" for r in runs for s in r.summary)]
    quick = f" (--quick: {', '.join(QUICK_FILES)})" if args.quick else ""
    print(f"toolz 1.1.0's tests{quick}; module-level tests marked harness_leaks(budget="
          f"{budget!r}) or limit_leaks({MEMRAY_LIMIT!r}); truth: {calls} calls each; one "
          "pytest process per run, no xdist.\n")
    odd += between[1:]
    print("\n".join([*lines, "", between[0], "", "notes:", *(f"  {n}" for n in notes), "",
                     "disagreements (with truth, or between the harness runs):",
                     *(f"  {o}" for o in odd or ["none"])]))
    args.json.write_text(json.dumps({
        "budget": budget, "truth_calls": calls, "quick": args.quick, "truth": truth_of,
        "runs": [asdict(r) for r in runs],
        "stability": stable, "disagreements": odd, "notes": notes,
        "table": lines}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
