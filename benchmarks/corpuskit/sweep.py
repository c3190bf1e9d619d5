"""A case through harness as a user runs it: a matrix file with one local image per
release (`{name, pip: [...]}`), live mode (`max_iterations`, harness's defaults for the
rest), `harness sweep` in a subprocess; then the cells read back from results.json.
`redecide` re-decides a results directory with another tree's rules (`harness report
DIR --reanalyze --write` run from that tree), so two rule sets judge the same samples.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpuskit.cases import Case

MAX_ITERATIONS = 2000
# A cell's verdict as the runner keeps it where the cell also found a slowdown: a leak
# with "late steps 5.22x early" beside it (a handler added per call leaks and slows
# every later call) is both findings.
ALSO_SLOWER = "+slowdown"
MEMORY_BAD = ("leak", "oom", "timeout")
# How long each cell runs, as the matrix's `defaults:` say it: a time budget (issue 49),
# or the call count the runner wrote before it (`max_iterations: 2000`, "--length
# calls"), which a tree from before budgets reads.
# "default": no length key at all (harness's own default, a 5 s budget since issue 49).
# "quick": a 0.5 s budget and one confirmation round, the benchmarks' `--quick` (CI's
# smoke run of every stage: its verdicts are not what it checks; a round pair runs the
# rounds' path, the default 3-6 of them cost CI a run pair each).
LENGTHS: dict[str, dict[str, Any]] = {
    "budget": {"budget": "5s"}, "calls": {"max_iterations": MAX_ITERATIONS}, "default": {},
    "quick": {"budget": "0.5s", "rounds": 1}}
SWEEP_TIMEOUT_S = 3600
UNAVAILABLE = 3          # harness's exit code: an image (a venv) could not be had


@dataclass(frozen=True)
class Cell:
    release: str
    verdict: str            # harness's verdict, "missing" when no result was written
    calls: int              # measured calls at the decision (live), else calls run
    seconds: float          # the cell's run, interpreter start to exit
    venv: str | None        # the venv's directory (psleak and pytest-memray run in it)
    reason: str


@dataclass(frozen=True)
class Swept:
    case: Case
    directory: Path | None
    rc: int
    cells: dict[str, Cell]          # release -> cell
    first_bad: str | None           # release harness names first bad
    wall_s: float
    said: str                       # the sweep's stderr tail when it failed


def matrix_yaml(case: Case, memray: bool = True, length: str = "budget") -> str:
    """The matrix a user would write for the case (JSON is YAML)."""
    images = [{"name": case.label(r), "pip": case.requirements(r, memray=memray)}
              for _, r in case.releases()]
    scenario: dict[str, Any] = {"script": str(case.path), "id": case.slug}
    if case.params:
        scenario["params"] = case.params
    doc: dict[str, Any] = {
        "name": f"corpus-{case.slug}", "runtime": "local",
        "defaults": {**LENGTHS[length], "timeout": "10m"},
        "matrix": {"image": images, "gpu": ["none"], "scenario": [scenario]},
    }
    # The good release is the baseline; where no release is good (the bug arrived with
    # the feature), the fixed one: else the row's first image, the bad release, would be
    # the baseline, and a fixed release slower per call than the bad one's first calls
    # (freezegun 0.3.12 against 0.1.19, before 0.1.19's list has grown) a "regression"
    # against the bug itself.
    reference = case.versions.get("good") or case.versions.get("fixed")
    if reference is not None:
        doc["baseline"] = {"image": case.label(reference)}
    return json.dumps(doc, indent=1)


def _harness(root: Path, args: list[str], cwd: Path, timeout: float
             ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def read_cells(case: Case, directory: Path) -> tuple[dict[str, Cell], str | None]:
    """The case's cells and first bad release from a results directory."""
    got = json.loads((directory / "results.json").read_text())
    by_label = {case.label(r): r for _, r in case.releases()}
    cells = {}
    for c in got.get("cells", {}).values():
        release = by_label.get(c.get("image", {}).get("label", ""))
        if release is None:
            continue
        live = c.get("live") or {}
        end = c.get("end") or {}
        calls = live.get("calls_to_decision") or end.get("iterations") or 0
        timings = c.get("timings") or {}
        verdict = str(c.get("verdict"))
        if verdict in MEMORY_BAD and any(f.get("kind") == "slowdown"
                                         for f in c.get("findings") or ()):
            # A memory finding and a slowdown beside it, both in the cell's words
            # ("leak: heap +323 B/call, late steps 5.22x early"): one verdict, two bugs
            verdict += ALSO_SLOWER
        cells[release] = Cell(release, verdict, int(calls),
                              float(timings.get("run_s") or 0.0),
                              (c.get("image", {}).get("labels") or {}).get("venv"),
                              str(c.get("reason", "")))
    first = None
    for row in got.get("rows", []):
        first = by_label.get(row.get("first_bad") or "")
    return cells, first


def sweep(case: Case, root: Path, work: Path, memray: bool = True, length: str = "budget"
          ) -> Swept:
    """Run the case's matrix with the harness of `root`; results under `work`."""
    import time
    work.mkdir(parents=True, exist_ok=True)
    matrix = work / f"{case.slug}.yaml"
    matrix.write_text(matrix_yaml(case, memray, length))
    out = work / "reports"
    t0 = time.perf_counter()
    done = _harness(root, ["sweep", str(matrix), "--out", str(out), "-q"], work,
                    SWEEP_TIMEOUT_S)
    wall = time.perf_counter() - t0
    runs = sorted((out / f"corpus-{case.slug}").glob("[0-9]*[0-9]"))
    if not runs or not (runs[-1] / "results.json").exists():
        return Swept(case, None, done.returncode, {}, None, wall,
                     (done.stderr or done.stdout)[-1500:])
    cells, first = read_cells(case, runs[-1])
    return Swept(case, runs[-1], done.returncode, cells, first, wall,
                 (done.stderr or done.stdout)[-1500:] if done.returncode not in (0, 1)
                 else "")


def worktree(rev: str, root: Path, into: Path) -> Path:
    """A detached git worktree of `rev` at `into`.

    Raises:
        RuntimeError: git cannot make it (an unknown revision).
    """
    got = subprocess.run(["git", "-C", str(root), "worktree", "add", "--detach", str(into),
                          rev], capture_output=True, text=True)
    if got.returncode:
        raise RuntimeError(f"git worktree add {rev}: {got.stderr.strip()[-400:]}")
    return into


def drop_worktree(root: Path, path: Path) -> None:
    subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(path)],
                   capture_output=True, text=True)


def redecide(swept: Swept, old_root: Path, work: Path, memray: bool = True,
             fresh: bool = False) -> tuple[Swept, str]:
    """The same samples decided by `old_root`'s rules, or where that tree cannot
    re-decide a directory (or `fresh`: its run's length and live stop are what is
    compared), a fresh sweep by it, as its runner wrote the matrix (`max_iterations`).
    Returns (result, "re-decided" | "swept")."""
    if swept.directory is not None and not fresh:
        target = swept.directory.with_name(swept.directory.name + "-reanalyzed")
        shutil.rmtree(target, ignore_errors=True)
        done = _harness(old_root, ["report", str(swept.directory), "--reanalyze",
                                   "--write"], old_root, 1800)
        if target.is_dir() and (target / "results.json").exists():
            kept = swept.directory.with_name(swept.directory.name + "-old")
            shutil.rmtree(kept, ignore_errors=True)
            target.rename(kept)
            cells, first = read_cells(swept.case, kept)
            return Swept(swept.case, kept, done.returncode, cells, first, 0.0, ""), \
                "re-decided"
    return sweep(swept.case, old_root, work / "old", memray, "calls"), "swept"
