"""`harness report DIR --reanalyze [--set analysis.KEY=VALUE] [--write]`: every cell of a
recorded run decided again from its samples, printed, and with --write kept as a new
directory beside the run (the run itself is never written)."""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
from collections.abc import Collection
from pathlib import Path

from harness.analysis.kinds import UNREADABLE
from harness.answers.reanalyze import changed_by, reanalyze
from harness.app.exits import exit_code
from harness.errors import InputError, StoreError
from harness.matrixfile.analysisblock import analysis_of
from harness.report import ConsoleReporter, Report, write_all
from harness.result.codec import JSON
from harness.result.model import Planned
from harness.store import RunStore, SeriesCache
from harness.store.runs import REANALYZED, started_of


def reanalyzed(args: argparse.Namespace, recorded: Report,
               outdated: Collection[str] = ()) -> int:
    """`--reanalyze`: every cell decided again; the table, what changed, the exit code
    the sweep would give now. Writes only with `--write`, into a new directory."""
    if args.issue is not None or (args.format not in (None, "console")):
        raise InputError("--reanalyze prints the console table; --issue and --format "
                         f"{args.format or ''} read the directory as recorded")
    # A copy written by --write was decided with the --set it records (results.json's
    # meta, `analysis_set`): deciding it again starts from those, so an untouched copy
    # gives back its verdicts too.
    kept = recorded.meta.get("analysis_set")
    before = [str(x) for x in kept] if isinstance(kept, list) else []
    cfg = analysis_of(args.dir / "matrix.yaml", [*before, *args.overrides])
    base = recorded.meta.get("baseline")
    results, changed = reanalyze(recorded.results, SeriesCache(args.dir), cfg,
                                 base if isinstance(base, str) else None)
    plain = results
    if args.overrides and changed:
        plain, _ = reanalyze(recorded.results, SeriesCache(args.dir),
                             analysis_of(args.dir / "matrix.yaml", before),
                             base if isinstance(base, str) else None)
    changed = changed_by(changed, plain, "--set " + " --set ".join(args.overrides)
                         if args.overrides else "")
    # A cell whose samples were cut short is unreadable now: named as missing, and no
    # first bad is named across it (its row's plan entry is kept for that).
    cut = {c.cell: c.reason for c in changed if c.after == UNREADABLE}
    planned = list(recorded.planned) + [
        Planned(cid, r.row, r.image.label, r.image.index)
        for cid, r in recorded.results.items()
        if cid in cut and cid not in {p.id for p in recorded.planned}]
    report = Report.from_results(recorded.name, results, recorded.meta, args.dir,
                                 planned=planned, unreadable={**recorded.unreadable, **cut},
                                 outdated=outdated)
    ConsoleReporter.from_results(report).render(sys.stdout, width=args.width,
                                                details=args.details)
    how = (" with " + ", ".join(args.overrides)) if args.overrides else ""
    print(f"\nre-decided {len(results)} cells from their samples{how}: "
          f"{len(changed)} verdict(s) changed" + (":" if changed else ""))
    for c in changed:
        print(f"  {c.cell}: {c.before} -> {c.after} ({c.reason})"
              + (f"; changed by {c.by}" if c.by else ""))
    note = report.incomplete_note()
    if note is not None:
        print(note)
    if args.write:
        out = write_beside(args.dir, recorded, report, planned, [*before, *args.overrides])
        print(f"written: {out} ({args.dir} unchanged)")
    else:
        print(f"nothing written; --write puts the re-decided run beside {args.dir}")
    return exit_code(report)


def write_beside(run_dir: Path, recorded: Report, report: Report,
                 planned: list[Planned], analysis_set: list[str]) -> Path:
    """`--reanalyze --write`: the re-decided run as a new directory beside `run_dir`,
    recording the --set it was decided with (`analysis_set` in results.json's meta:
    deciding the copy again starts from them).

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
