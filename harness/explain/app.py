"""`harness explain`'s work: choose and gate the pairs, run them with attribution, and
rewrite the run's reports; `cli.explain` prints the model and exit code."""

from __future__ import annotations

import difflib
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.answers.search import pairs, unpaired
from harness.app import answer
from harness.app.command import printer
from harness.errors import (
    EXIT_ENVIRONMENT,
    EXIT_OK,
    EXIT_UNDECIDED,
    InputError,
    StoreError,
    without_out,
)
from harness.explain.plan import explain_matrix
from harness.report import Report, write_all
from harness.runtimes import Engines
from harness.signals import interruptible
from harness.stages.orchestrator import Sweep
from harness.store import RunStore
from harness.store.gate import as_recorded, read_gated, refresh_line, why_not_current
from harness.store.results import load_json_keys

if TYPE_CHECKING:
    from harness.answers.search import Pair
    from harness.matrixfile.model import Matrix
    from harness.result.model import CellResult, Planned
    from harness.store.gate import Gated


@dataclass(frozen=True)
class Explained:
    """What `explain_command` did: exit code, report model and the cells explained."""

    code: int
    report: Report | None = None
    cells: list[str] = field(default_factory=list)


def explain_command(root: Path, cell: str | None = None, matrix_file: Path | None = None,
                    runtime: str | None = None, docker_host: str | None = None,
                    quiet: bool = False) -> Explained:
    """Explain each row's first bad cell (only `cell`) against its last good, in `root`.

    Raises:
        InputError: see `chosen`; a directory whose matrix cannot be found.
        EnvironmentUnavailable: no engine to run the cells.
    """
    found, matrix = read_gated(root, matrix_file)
    readable = {**found.results, **found.was}
    todo = chosen(readable, cell, found.planned, found.unreadable)
    if cell is None and not todo and hidden_bad(readable, found):
        return Explained(EXIT_UNDECIDED)
    if not todo and (found.unreadable or found.missing):
        # An unread cell may be the bad one: never "no row has a bad cell"
        for cid, why in sorted(found.gaps.items()):
            if cid in found.unreadable or cid in found.missing:
                print(f"harness: {cid}: {why or 'not run'}", file=sys.stderr)
        print(f"  fix: {found.refresh} runs them again, then harness explain",
              file=sys.stderr)
        return Explained(EXIT_UNDECIDED)
    if not todo:
        answer.say("no row has a bad cell: nothing to explain")
        return Explained(EXIT_OK)
    if matrix is None:
        raise InputError(found.unchecked)
    engines = Engines.for_matrix(matrix, runtime or matrix.runtime, docker_host)
    todo = current(todo, found.results, matrix, engines, root, found)
    if not todo:
        print("harness: no pair left to explain: run the changed cells again first",
              file=sys.stderr)
        return Explained(EXIT_UNDECIDED)
    report, explained = explain_pairs(root, found, matrix, engines, todo, quiet)
    return Explained(EXIT_OK if explained else EXIT_ENVIRONMENT, report,
                     [p.cell for p in todo])


def chosen(results: dict[str, CellResult], cell: str | None,
           planned: Sequence[Planned] = (), unreadable: Collection[str] = ()) -> list[Pair]:
    if cell is not None and cell in unreadable:
        # Unreadable: what would be explained is not what the sweep decided.
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
    """The pairs whose run keys still match, so the lines named are the verdict's; each
    pair left out is said, with why and the fix."""
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


def hidden_bad(readable: dict[str, CellResult], found: Gated) -> bool:
    """Whether a row's bad cell is hidden behind an unread, stale or missing one (each
    said, with the rerun command), so it is never "no bad cell"."""
    hidden = unpaired(readable, found.planned, found.unreadable)
    for line in hidden:
        print(f"harness: {line}", file=sys.stderr)
    if hidden:
        print(f"  fix: {found.refresh} runs them again, then harness explain",
              file=sys.stderr)
    return bool(hidden)


def explain_pairs(root: Path, found: Gated, matrix: Matrix, engines: Engines,
                  todo: list[Pair], quiet: bool) -> tuple[Report, bool]:
    """Run the pairs with attribution and rewrite the reports (not if partial): the
    report model, and whether any run left a where record."""
    wanted = {cid for p in todo for cid in (p.cell, p.good) if cid}
    engines.start([c for c in matrix.cells if c.id in wanted])
    with interruptible():
        store = RunStore(root)
        try:
            store.lock()
        except StoreError as exc:
            raise without_out(exc, "wait for it to finish, then run the same command "
                                   "again") from exc
        with engines.stopped(store.unlock):
            sweep = Sweep(matrix, engines.default, store, printer(quiet), engines.by_host)
            explained = explain_matrix(sweep.ctx, matrix, found.results, todo, root)
            meta = load_json_keys(root / "results.json", ("meta",)).get("meta")
            report = Report.from_results(matrix.name, found.results,
                                         meta if isinstance(meta, dict) else None, root,
                                         planned=found.plan, unreadable=found.gaps,
                                         outdated=found.stale)
            if not report.missing_cells:   # a partial report never replaces a whole one
                write_all(store, report)
    return report, bool(explained)
