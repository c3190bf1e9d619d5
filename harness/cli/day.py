"""`harness day DIR [ROW]`: the day a dated row (`as_of:`) went bad, and the packages
that changed that day (day/<row>/ of the results directory)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.cli import answer, interruptible, options, printer
from harness.cli.culprit import cells_of, current_pairs
from harness.cli.helptext import FittedHelpFormatter
from harness.cli.report import newest_run
from harness.days.search import day_in_run
from harness.errors import EXIT_OK, EXIT_REGRESSION, EXIT_UNDECIDED, InputError
from harness.explain.model import pairs
from harness.orchestrator import prefetch_analysis
from harness.runtimes import Engines
from harness.store.gate import read_gated

if TYPE_CHECKING:
    from harness.days.search import DayOutcome
    from harness.matrixfile.model import Cell, Matrix
    from harness.store.gate import Gated

EPILOG = """examples:
  harness day reports/asof-demo                 each dated row's day, newest sweep
  harness day DIR cpu.multidict_pop             one row

A row over `as_of:` days (images NAME@DAY) whose first bad day follows a good one went
bad on a day between them. The days between are halved; a day is resolved (which pins
the index gave that day, cached for good) and run only when its pins are new: a day
that resolves as the last good or first bad day did takes that day's verdict. The
answer names the last good day, the first bad day and each package that changed
between their resolutions, with the time its new version was uploaded and each yanked
release it passes over ("passes over 6.5.0 (yanked: reason)": no day resolves to a
yanked release, docs/asof.md). The probes are cells in day/<row>/ of the results
directory; the answer is in day/<row>/day.json.

exit codes: 0 nothing to search (no dated row went bad after a good day), 1 the day
found, 2 bad input (no such directory or row), 3 environment unavailable (the index
cannot be reached), 4 a probe was untestable, 130 interrupted
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser("day", help="the day a dated (`as_of:`) row went bad, and what "
                                   "changed that day", epilog=EPILOG,
                       formatter_class=FittedHelpFormatter)
    p.add_argument("dir", type=Path, help="a results directory written by `harness sweep`")
    p.add_argument("row", nargs="?", help="only this row, e.g. cpu.multidict_pop (default: "
                                          "each dated row that went bad after a good day)")
    p.add_argument("--matrix", type=Path,
                   help="the sweep's matrix file (default: the one its plan.json names)")
    options.add(p, "quiet")
    answer.add(p)
    p.set_defaults(func=run)


def dated_pairs(found: Gated, row: str | None) -> list[tuple[str, str]]:
    """(last good cell id, first bad cell id) of each dated row to search.

    Raises:
        InputError: an unknown row.
    """
    # Chosen over every readable cell, stale ones too: a row whose ends are stale is
    # then said to be stale (`current_pairs`), never "nothing to search".
    res = {**found.results, **found.was}
    rows = sorted({r.row for r in res.values()})
    if row is not None and row not in rows:
        raise InputError(f"no row {row!r} in this directory (allowed values: "
                         f"{', '.join(rows)})")
    return [(p.good, p.cell) for p in pairs(res, None, found.planned, found.unreadable)
            if p.good is not None and (row is None or p.row == row)
            and res[p.good].image.labels.get("as_of") and res[p.cell].image.labels.get("as_of")
            and res[p.good].image.index < res[p.cell].image.index]


@answer.answers("day", {"dir": None, "rows": []})
def run(args: argparse.Namespace) -> int:
    options.check(args)
    root = newest_run(args.dir, "harness day")
    answer.update(dir=str(root))
    found, matrix = read_gated(root, args.matrix)
    todo = dated_pairs(found, args.row)
    if not todo:
        answer.say("no dated row went bad after a good day: nothing to search")
        return EXIT_OK
    if matrix is None:
        raise InputError(found.unchecked)
    todo = current_pairs(found, todo, "harness day")
    if not todo:
        return EXIT_UNDECIDED
    cells = cells_of(matrix, [cid for pair in todo for cid in pair])
    prefetch_analysis()
    engines = Engines.for_matrix(matrix, "local", None)
    engines.start(list(cells.values()))
    outcomes = search(args, root, found, (matrix, engines), cells, todo)
    if any(not o.found for o in outcomes):
        return EXIT_UNDECIDED
    return EXIT_REGRESSION if outcomes else EXIT_OK


def search(args: argparse.Namespace, root: Path, found: Gated,
           run_on: tuple[Matrix, Engines], cells: dict[str, Cell],
           todo: list[tuple[str, str]]) -> list[DayOutcome]:
    """Each row's days searched in day/<row>/ of the run, the answer in day.json there."""
    matrix, engines = run_on
    outcomes: list[DayOutcome] = []
    with interruptible():
        try:
            for g_id, b_id in todo:
                g, b = cells[g_id], cells[b_id]
                print(f"day {b.row}: {g.image.label} ({found.results[g_id].verdict}) .. "
                      f"{b.image.label} ({found.results[b_id].verdict})", flush=True)
                try:
                    out = day_in_run(root, matrix, engines.default, g, found.results[g_id],
                                     b, found.results[b_id],
                                     lambda s: print(f"  {s}", flush=True),
                                     printer(args.quiet))
                except ValueError as exc:
                    raise InputError(f"{b.row}: {exc}") from exc
                print(f"{b.row}: {out.sentence()}\n  {out.counts()}", flush=True)
                outcomes.append(out)
                answer.update(rows=[{**o.to_dict(), "sentence": o.sentence()}
                                    for o in outcomes])
        finally:
            engines.stop()
    return outcomes
