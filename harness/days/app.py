"""`harness day`'s work: search the days of each dated row that went bad, in day/<row>/;
`cli.day` parses and prints."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from harness.answers.search import pairs
from harness.app import answer
from harness.app.command import printer
from harness.culprit.app import known_rows, started
from harness.days.search import day_in_run
from harness.errors import EXIT_OK, EXIT_REGRESSION, EXIT_UNDECIDED, InputError
from harness.runtimes import Engines
from harness.signals import interruptible
from harness.store.gate import read_gated

if TYPE_CHECKING:
    from harness.days.search import DayOutcome
    from harness.matrixfile.model import Cell, Matrix
    from harness.store.gate import Gated


def day_command(root: Path, row: str | None = None, matrix_file: Path | None = None,
                quiet: bool = False) -> int:
    """Search each dated row's days (only `row`'s) in `root`; the exit code.

    Raises:
        InputError: an unknown row, no matrix found, or a row that cannot be searched.
    """
    found, matrix = read_gated(root, matrix_file)
    undated(root, found)
    todo = dated_pairs(found, row)
    if not todo:
        answer.say("no dated row went bad after a good day: nothing to search")
        return EXIT_OK
    if matrix is None:
        raise InputError(found.unchecked)
    engines = Engines.for_matrix(matrix, "local", None)
    todo, cells = started(found, todo, matrix, engines, "harness day")
    if not todo:
        return EXIT_UNDECIDED
    outcomes = search(quiet, root, found, (matrix, engines), cells, todo)
    if any(not o.found for o in outcomes):
        return EXIT_UNDECIDED
    return EXIT_REGRESSION if outcomes else EXIT_OK


def undated(root: Path, found: Gated) -> None:
    """Refuse a directory with no dated image: there is nothing the day search can take.

    Raises:
        InputError: no readable cell of the directory is of an `as_of:` image.
    """
    if not any(r.image.labels.get("as_of") for r in (*found.results.values(),
                                                       *found.was.values())):
        raise InputError(f"{root}: no dated image (as_of:) here: harness day searches the "
                         "days between a dated row's last good and first bad day\n  fix: "
                         "give an image `as_of:` days in the matrix (docs/asof.md) and sweep "
                         f"it; which package change made an image bad: harness culprit {root}")


def dated_pairs(found: Gated, row: str | None) -> list[tuple[str, str]]:
    """(last good cell id, first bad cell id) of each dated row to search.

    Raises:
        InputError: an unknown row.
    """
    # Stale cells too, so a stale row is said to be stale, not "nothing to search".
    res = {**found.results, **found.was}
    known_rows(res, row)
    return [(p.good, p.cell) for p in pairs(res, None, found.planned, found.unreadable)
            if p.good is not None and (row is None or p.row == row)
            and res[p.good].image.labels.get("as_of") and res[p.cell].image.labels.get("as_of")
            and res[p.good].image.index < res[p.cell].image.index]


def search(quiet: bool, root: Path, found: Gated,
           run_on: tuple[Matrix, Engines], cells: dict[str, Cell],
           todo: list[tuple[str, str]]) -> list[DayOutcome]:
    """Each row's days searched in day/<row>/ of the run, the answer in day.json there."""
    matrix, engines = run_on
    outcomes: list[DayOutcome] = []
    with interruptible(), engines.stopped():
        for g_id, b_id in todo:
            g, b = cells[g_id], cells[b_id]
            print(f"day {b.row}: {g.image.label} ({found.results[g_id].verdict}) .. "
                  f"{b.image.label} ({found.results[b_id].verdict})", flush=True)
            try:
                out = day_in_run(root, matrix, engines.default, g, found.results[g_id],
                                 b, found.results[b_id],
                                 lambda s: print(f"  {s}", flush=True),
                                 printer(quiet))
            except ValueError as exc:
                raise InputError(f"{b.row}: {exc}") from exc
            print(f"{b.row}: {out.sentence()}\n  {out.counts()}", flush=True)
            outcomes.append(out)
            answer.update(rows=[{**o.to_dict(), "sentence": o.sentence()}
                                for o in outcomes])
    return outcomes
