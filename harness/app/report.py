"""What `harness report` (and every command that reads a finished run) does before it
prints: the results directory found, its cells read through the gate into the report
model, and what may be rewritten there."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from harness import matrixfile
from harness.errors import InputError
from harness.report import Report
from harness.report.grid import console_width, say
from harness.runtimes.process import check_output
from harness.store import load_json
from harness.store.gate import read_gated
from harness.store.results import PLAN_FILE, load_json_keys
from harness.store.runs import SWEEP_RESULTS, kind_of, newest, require, runs_of, shown, sweep_again

if TYPE_CHECKING:
    from harness.store.gate import Gated


def newest_run(path: Path, command: str) -> Path:
    """`path` if a results directory, else its newest sweep by start time; checked for `command`.

    Raises: InputError: not a results directory (nor a folder of them), or one of another kind.
    """
    if path.exists() and not path.is_dir():
        raise InputError(f"{path}: a file, not a results directory; {a_file(path, command)}")
    if not path.is_dir():
        raise InputError(f"{path}: no such directory; pass reports/<name>/<timestamp>")
    if kind_of(path) is None:
        found = newest(path, SWEEP_RESULTS)
        debris = runs_of(path, SWEEP_RESULTS)
        if found is None and debris:
            raise InputError(
                f"{path}: no run here holds a finished cell ({', '.join(p.name for p in debris)}"
                f": sweeps stopped before their first cell); run the sweep again "
                f"({sweep_again(debris[-1])}), "
                f"or read one as it is: {command} {debris[-1]}")
        path = found or path
    require(path, SWEEP_RESULTS, command)
    return path



def complete_report(run_dir: Path) -> bool:
    """Whether `run_dir` holds a complete run's reports: a results.json listing no missing
    cells."""
    data = load_json(run_dir / "results.json")
    return (isinstance(data, dict) and isinstance(data.get("cells"), dict)
            and not data.get("missing_cells"))



def run_dir(given: Path) -> Path:
    """The results directory `harness report` reads: `given`, or its newest run.

    Raises:
        InputError: a file, no such directory, or not a sweep's results.
    """
    return newest_run(given, "harness report")



def a_file(path: Path, command: str = "harness report") -> str:
    """What to pass to `command` instead of the file `path`."""
    if kind_of(path.parent) is not None:
        return f"pass the results directory it is in: {command} {shown(path.parent)}"
    try:
        name = matrixfile.load(path).name
    except InputError:
        return "pass reports/<name>/<timestamp>, a directory harness sweep wrote"
    runs = Path("reports") / name
    if newest(runs, SWEEP_RESULTS) is not None:
        return f"a matrix file; its runs are in {runs}: {command} {runs}"
    return (f"a matrix file, not swept into {runs} yet: harness sweep {path}, then "
            f"{command} {runs}")



def recorded(root: Path) -> tuple[Report, Gated]:
    """The report model of a results directory as recorded, and what was read.

    Raises:
        InputError: the directory holds neither results nor a plan.
    """
    found, _ = read_gated(root)
    if not found.results and not found.planned and not found.was:
        raise InputError(f"{root}: no cells/*/result.json here; pass a directory "
                         "written by `harness sweep`")
    unchecked_note(found)
    old = load_json_keys(root / "results.json", ("name", "meta"))
    name = old.get("name")
    meta = old.get("meta")
    report = Report.from_results(name if isinstance(name, str) and name
                                 else root.parent.name, found.results,
                                 meta if isinstance(meta, dict) else None, root,
                                 planned=found.plan, unreadable=found.gaps,
                                 stored=found.stored, outdated=found.stale)
    return report, found



def unchecked_note(found: Gated) -> None:
    """Say so where the gate could not check the cells against their inputs (no matrix
    found, as in a copied directory): never passed silently."""
    if found.unchecked and (found.results or found.unreadable):
        say(sys.stderr, f"harness: note: {found.unchecked.split('; pass --matrix')[0]}: its "
            "cells are not checked against their inputs now, and read as recorded",
            console_width(sys.stderr))



KEPT = ("git tracks its files: no report file rewritten (a run kept as recorded; "
        "`--format md` prints one, --force rewrites them)")



def kept_by_git(root: Path) -> bool:
    """Whether `root` holds files git tracks (a run kept in a repository): a plain
    `harness report` then never rewrites it. False without git or outside a repository."""
    try:
        code, out = check_output(["git", "-C", str(root), "ls-files", "-z", "--", "."],
                                 timeout=20)
    except OSError:
        return False
    return code == 0 and bool(out)



def plan_notes(root: Path, found: Gated) -> list[str]:
    """What the run's cells were checked against, where it is not its plan.json."""
    if not found.has_plan:
        return [f"\n{root}: no plan.json (sweeps of older versions wrote none) and no "
                "readable results.json or matrix.yaml: cells that never ran cannot be named"]
    if found.plan_from != PLAN_FILE:
        return [f"\n{root}: no plan.json (sweeps of older versions wrote none): cells "
                f"checked against its {found.plan_from}"
                + (" (every cell of the matrix; a sweep run with -k had fewer)"
                   if found.plan_from == "matrix.yaml" else "")]
    return []
