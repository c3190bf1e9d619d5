"""`harness report DIR --reanalyze [--set analysis.KEY=VALUE] [--write]`: every cell of a
recorded run decided again (`reanalyze.decide`); with --write kept as a new directory
beside the run, which is never written."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.analysis.kinds import UNREADABLE
from harness.errors import StoreError
from harness.matrixfile.load import analysis_of
from harness.reanalyze.decide import changed_by, reanalyze
from harness.report import Report, write_all
from harness.result.codec import JSON
from harness.result.model import Planned
from harness.store import RunStore, SeriesCache
from harness.store.runs import REANALYZED, started_of

if TYPE_CHECKING:
    from harness.reanalyze.decide import Changed


@dataclass(frozen=True)
class Redecided:
    """A recorded run decided again: its report, the changed cells (and by what), its plan
    with the cut-short cells, the --set it was decided with."""

    report: Report
    changed: list[Changed]
    planned: list[Planned]
    analysis_set: list[str]


def redecide(root: Path, recorded: Report, overrides: Sequence[str] = (),
              outdated: Collection[str] = ()) -> Redecided:
    """Every cell of the run in `root` decided again, with `overrides` (--set) over what
    the run was decided with."""
    # A --write copy starts from the --set it records, so an untouched copy gives back
    # its verdicts.
    kept = recorded.meta.get("analysis_set")
    before = [str(x) for x in kept] if isinstance(kept, list) else []
    cfg = analysis_of(root / "matrix.yaml", [*before, *overrides])
    base = recorded.meta.get("baseline")
    results, changed = reanalyze(recorded.results, SeriesCache(root), cfg,
                                 base if isinstance(base, str) else None)
    plain = results
    if overrides and changed:
        plain, _ = reanalyze(recorded.results, SeriesCache(root),
                             analysis_of(root / "matrix.yaml", before),
                             base if isinstance(base, str) else None)
    changed = changed_by(changed, plain, "--set " + " --set ".join(overrides)
                         if overrides else "")
    # A cut-short cell is named as missing; no first bad is named across it.
    cut = {c.cell: c.reason for c in changed if c.after == UNREADABLE}
    planned = list(recorded.planned) + [
        Planned(cid, r.row, r.image.label, r.image.index)
        for cid, r in recorded.results.items()
        if cid in cut and cid not in {p.id for p in recorded.planned}]
    report = Report.from_results(recorded.name, results, recorded.meta, root,
                                 planned=planned, unreadable={**recorded.unreadable, **cut},
                                 outdated=outdated)
    return Redecided(report, changed, planned, [*before, *overrides])

def write_beside(run_dir: Path, recorded: Report, report: Report,
                 planned: list[Planned], analysis_set: list[str]) -> Path:
    """`--reanalyze --write`: the re-decided run as a new directory beside `run_dir`,
    recording its --set (`analysis_set` in results.json's meta).

    Raises:
        StoreError: the new directory cannot be written.
    """
    out = beside(run_dir)
    started = started_of(run_dir)   # the copy is of cells that ran then, not now
    store = RunStore(out)
    copy_run(run_dir, out)
    matrix = recorded.meta.get("matrix")
    # The copy's plan names what it lacks too (a cut-short cell has no result).
    store.mark(REANALYZED, recorded.name, matrix if isinstance(matrix, str) else "",
               tuple(planned), started)
    for res in report.results.values():
        store.write_cell(res)
    meta: dict[str, JSON] = {**report.meta, "analysis_set": list(analysis_set)}
    write_all(store, dataclasses.replace(report, root=None, meta=meta))
    return out


def beside(run_dir: Path) -> Path:
    """A new directory next to `run_dir` for its re-decided copy."""
    n = 1
    while True:
        out = run_dir.with_name(run_dir.name + "-reanalyzed" + (f"-{n}" if n > 1 else ""))
        if not out.exists():
            return out
        n += 1


def copy_run(src: Path, dst: Path) -> None:
    """What a run left, but its results and reports: cells' samples and logs, the matrix.

    Raises:
        StoreError: the new directory cannot be written.
    """

    try:
        dst.mkdir(parents=True)
        for name in ("matrix.yaml",):
            if (src / name).is_file():
                shutil.copy2(src / name, dst / name)
        for cell in sorted((src / "cells").iterdir()):
            if cell.is_dir():
                shutil.copytree(cell, dst / "cells" / cell.name,
                                ignore=shutil.ignore_patterns("result.json", "stop"))
    except OSError as exc:
        raise StoreError(f"cannot write {dst}: {exc}\n  fix: pass a directory you can "
                         "write beside, or run without --write") from exc
