"""`harness explain DIR [CELL]`: where the first bad cell of each row leaks or slows,
against its last good cell (both run again with attribution; cells/<id>/where.json)."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.answers.explain import pairs, unpaired
from harness.cli import answer, interruptible, options, printer, without_out
from harness.cli.helptext import FittedHelpFormatter
from harness.cli.report import newest_run
from harness.errors import EXIT_ENVIRONMENT, EXIT_OK, EXIT_UNDECIDED, InputError, StoreError
from harness.orchestrator import Sweep
from harness.plans.explain import explain_matrix
from harness.report import ConsoleReporter, Report, write_all
from harness.runtimes import Engines
from harness.store import RunStore
from harness.store.gate import as_recorded, read_gated, refresh_line, why_not_current
from harness.store.jsonhead import load_json_keys

if TYPE_CHECKING:
    from harness.answers.explain import Pair
    from harness.matrixfile.model import Matrix
    from harness.result.model import CellResult, Planned
    from harness.store.gate import Gated

EPILOG = """examples:
  harness explain reports/multidict-pop/20261123-080000     every row's first bad vs last good
  harness explain DIR multidict-6.5.1.cpu.multidict_pop     one cell (with its last good)
  harness sweep examples/multidict.yaml --explain           the sweep, then explain

Each explained cell runs again with the agent's --attribute: memory verdicts with
tracemalloc (heap), PyTorch's CUDA allocator history (device) and memray (native, where
the image has it); time verdicts with a stack sampler and per-op times (TensorFlow 1
step stats, torch.profiler). These runs are slower and decide no verdict. The answer
goes to cells/<id>/where.json and into report.md, report.html and `--issue`.

exit codes: 0 explained (or nothing to explain), 2 bad input (no such directory or
cell, no matrix), 3 environment unavailable (no engine; no attributed run succeeded),
4 nothing explained: the cells to explain changed since the sweep (its fix line runs
them again), 130 interrupted
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "explain", help="where the first bad cell leaks or slows, against the last good one",
        formatter_class=FittedHelpFormatter, epilog=EPILOG)
    p.add_argument("dir", type=Path, help="a results directory written by `harness sweep`")
    p.add_argument("cell", nargs="?", help="only this cell (default: each row's first bad)")
    p.add_argument("--matrix", type=Path,
                   help="the sweep's matrix file (default: the one its plan.json names)")
    options.add(p, "runtime", "docker-host", "quiet")
    answer.add(p)
    p.set_defaults(func=run)


def chosen(results: dict[str, CellResult], cell: str | None,
           planned: Sequence[Planned] = (), unreadable: Collection[str] = ()) -> list[Pair]:
    if cell is not None and cell in unreadable:
        # Never explained: its result cannot be read, so what would be explained is not
        # what the sweep decided (issue 35 item 1).
        raise InputError(f"cell {cell!r} is unreadable here (its result.json is damaged "
                         "or cut short), so it is not explained; `harness report DIR` "
                         "names it and the command that runs it again")
    if cell is not None and cell not in results:
        near = difflib.get_close_matches(cell, list(results), n=1)
        raise InputError(f"no cell {cell!r} in this directory"
                         + (f"; did you mean {near[0]!r}?" if near else
                            f" (allowed values: {', '.join(sorted(results))})"))
    return pairs(results, cell, planned, unreadable)


def current(todo: list[Pair], results: dict[str, CellResult], matrix: Matrix,
            engines: Engines, where: Path, found: Gated | None = None) -> list[Pair]:
    """The pairs whose cells the matrix still runs the way the sweep did (their keys
    match): explaining a verdict of another run would name the wrong lines. Each pair
    left out is said, with why and the fix."""
    cells = {c.id: c for c in matrix.cells}
    runtimes = engines.by_host or {}
    keep = []
    for pair in todo:
        stale = found.not_current([c for c in (pair.cell, pair.good) if c]) if found else []
        for cid in (pair.cell, pair.good):
            if cid is None or cid not in cells or cid not in results:
                continue   # explain_matrix names a cell the matrix no longer has
            cell = as_recorded(cells[cid], results[cid])
            name = runtimes.get(cell.host.label, engines.default).name
            why = why_not_current(results[cid], cell, name)
            if why is not None:
                stale.append(f"{cid}: {why}")
        if stale:
            print(f"harness: not explained: {'; '.join(stale)}\n  fix: "
                  f"{refresh_line(where, matrix)} runs it again, then explain", file=sys.stderr)
        else:
            keep.append(pair)
    return keep


@answer.answers("explain", {"dir": None, "cells": []})
def run(args: argparse.Namespace) -> int:
    options.check(args)
    root = newest_run(args.dir, "harness explain")
    answer.update(dir=str(root))
    found, matrix = read_gated(root, args.matrix)
    readable = {**found.results, **found.was}
    todo = chosen(readable, args.cell, found.planned, found.unreadable)
    if args.cell is None and not todo and hidden_bad(readable, found):
        return EXIT_UNDECIDED
    if not todo and (found.unreadable or found.missing):
        # A cell it could not read may be the bad one: never "no row has a bad cell"
        # (report exits 4 on the same directory)
        for cid, why in sorted(found.gaps.items()):
            if cid in found.unreadable or cid in found.missing:
                print(f"harness: {cid}: {why or 'not run'}", file=sys.stderr)
        print(f"  fix: {found.refresh} runs them again, then harness explain",
              file=sys.stderr)
        return EXIT_UNDECIDED
    if not todo:
        answer.say("no row has a bad cell: nothing to explain")
        return EXIT_OK
    if matrix is None:
        raise InputError(found.unchecked)
    engines = Engines.for_matrix(matrix, args.runtime or matrix.runtime, args.docker_host)
    todo = current(todo, found.results, matrix, engines, root, found)
    if not todo:
        print("harness: no pair left to explain: run the changed cells again first",
              file=sys.stderr)
        return EXIT_UNDECIDED
    report, explained = explain_pairs(root, found, matrix, engines, todo, args.quiet)
    shown(report, [p.cell for p in todo])
    if not explained:
        print("harness: no attributed run left a where record; see explain/*/agent.log",
              file=sys.stderr)
        return EXIT_ENVIRONMENT
    return EXIT_OK


def shown(report: Report, cells: list[str]) -> None:
    """explain's answer for `cells`: in words (`ConsoleReporter.render_where`), or in
    JSON mode each cell's verdict, its where.json and its paired cell's, as the words
    read them from the report model (`Report.explained`)."""
    if not answer.active():
        ConsoleReporter.from_results(report).render_where(sys.stdout, cells)
        return
    out = []
    for cid in cells:
        ex = report.explained.get(cid)
        paired = report.explained.get(ex.paired) if ex is not None and ex.paired else None
        out.append({"cell": cid, "result": answer.cell_ref(report.results.get(cid)),
                    "where": ex.to_json() if ex is not None else None,
                    "paired_where": paired.to_json() if paired is not None else None})
    answer.update(cells=out)


def hidden_bad(readable: dict[str, CellResult], found: Gated) -> bool:
    """Whether a row has a bad cell behind one that is unreadable, stale or not run (so
    no pair is named): each said, with the command that runs them again. Such a row is
    never "no bad cell"."""
    hidden = unpaired(readable, found.planned, found.unreadable)
    for line in hidden:
        print(f"harness: {line}", file=sys.stderr)
    if hidden:
        print(f"  fix: {found.refresh} runs them again, then harness explain",
              file=sys.stderr)
    return bool(hidden)


def explain_pairs(root: Path, found: Gated, matrix: Matrix, engines: Engines,
                  todo: list[Pair], quiet: bool) -> tuple[Report, bool]:
    """The pairs' cells run again with attribution, their where.json written beside
    them, and the run's reports rewritten with them (unless cells are missing: a partial
    report never replaces a whole one): the report model, and whether any attributed
    run left a where record."""
    wanted = {cid for p in todo for cid in (p.cell, p.good) if cid}
    engines.start([c for c in matrix.cells if c.id in wanted])
    with interruptible():
        store = RunStore(root)
        try:
            store.lock()
        except StoreError as exc:
            raise without_out(exc, "wait for it to finish, then run the same command "
                                   "again") from exc
        try:
            sweep = Sweep(matrix, engines.default, store, printer(quiet), engines.by_host)
            explained = explain_matrix(sweep.ctx, matrix, found.results, todo, root)
            meta = load_json_keys(root / "results.json", ("meta",)).get("meta")
            report = Report.from_results(matrix.name, found.results,
                                         meta if isinstance(meta, dict) else None, root,
                                         planned=found.plan, unreadable=found.gaps,
                                         outdated=found.stale)
            if not report.missing_cells:   # a partial report never replaces a whole one
                write_all(store, report)
        finally:
            try:
                engines.stop()
            finally:
                store.unlock()
    return report, bool(explained)
