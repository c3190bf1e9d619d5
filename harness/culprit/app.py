"""`harness culprit`'s work: choose and gate the pairs, search each in its row's
culprit/ folder, rewrite the reports and return the exit code."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.analysis.kinds import BAD, GOOD, UNAVAILABLE
from harness.answers.search import pairs
from harness.app import answer
from harness.app.command import exit_code as report_exit
from harness.app.command import hold, printer
from harness.culprit.changes import for_row
from harness.culprit.plan import docker_hybrids
from harness.culprit.run import RunsOn, culprit_in_run
from harness.culprit.search import FOUND, OUTSIDE
from harness.errors import (
    EXIT_ENVIRONMENT,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_UNDECIDED,
    InputError,
)
from harness.report import Report, write_all
from harness.runtimes import Engines
from harness.signals import interruptible
from harness.stages.orchestrator import prefetch_analysis
from harness.store import RunStore
from harness.store.gate import gate, matrix_of
from harness.store.results import drop_culprit, load_json_keys
from harness.store.runs import shown

if TYPE_CHECKING:
    from harness.culprit.plan import CulpritOutcome
    from harness.matrixfile.model import Cell, Matrix
    from harness.result.model import CellResult
    from harness.store.gate import Gated


@dataclass(frozen=True)
class CulpritAsked:
    """What `harness culprit` is asked (its flags).

    Attributes:
        row, matrix: Only this row (default: each with a first bad image); the sweep's matrix.
        good, bad: G and B as image labels (default: the row's last good and first bad).
        swap, repeats: No search: swap these packages both ways; more runs of an ambiguous one.
        runtime, docker_host, quiet: Another runtime and its engine; no progress lines.
    """

    row: str | None = None
    good: str | None = None
    bad: str | None = None
    matrix: Path | None = None
    swap: tuple[str, ...] = ()
    repeats: int = 1
    runtime: str | None = None
    docker_host: str | None = None
    quiet: bool = False

    def __post_init__(self) -> None:
        if self.repeats < 0:
            raise InputError("--repeats must be >= 0")


def culprit_command(root: Path, asked: CulpritAsked) -> int:
    """Every pair asked for searched in the results directory `root`; the exit code.

    Raises:
        InputError: see `chosen_pairs`; a matrix that lost the cells; a bad --swap.
        EnvironmentUnavailable: an engine that cannot run the cells.
    """
    matrix = matrix_of(root, "", asked.matrix)
    engines = Engines.for_matrix(matrix, asked.runtime or matrix.runtime, asked.docker_host)
    found = gated(root, matrix, engines)
    everything = {**found.results, **found.was}
    todo = chosen_pairs(everything, asked.row, asked.good, asked.bad, found.planned,
                        found.unreadable, root, bool(asked.swap))
    if not todo:
        return nothing_to_search(root, matrix.name, found, asked.row)
    todo, cells = started(found, todo, matrix, engines, "harness culprit")
    if not todo:
        return EXIT_UNDECIDED
    outcomes = search_rows(asked, root, found, matrix, engines, cells, todo)
    if outcomes:
        rewrite_reports(root, matrix.name, found)
    return exit_code(outcomes)


def chosen_pairs(results: dict[str, CellResult], row: str | None, good: str | None,
                 bad: str | None, planned: Any, unreadable: Any, root: Path,
                 swap: bool = False) -> list[tuple[str, str]]:
    """(G cell id, B cell id) per row to search; none where no bad image follows a good.

    Raises:
        InputError: an unknown row or image, or --good/--bad that do not fit.
    """
    rows = known_rows(results, row)
    if good is not None or bad is not None:
        if row is None and len(rows) > 1:
            raise InputError(f"--good/--bad name images of one row: pass ROW (allowed "
                             f"values: {', '.join(rows)})")
        this = row or rows[0]
        return [given_pair(results, this, good, bad, pairs(results, None, planned,
                                                            unreadable), root, swap)]
    out = [(p.good, p.cell) for p in pairs(results, None, planned, unreadable)
           if p.good is not None and (row is None or p.row == row)]
    return out


def known_rows(results: Mapping[str, CellResult], row: str | None) -> list[str]:
    """The rows of `results`, sorted.

    Raises:
        InputError: `row` is given and is none of them.
    """
    rows = sorted({r.row for r in results.values()})
    if row is not None and row not in rows:
        raise InputError(f"no row {row!r} in this directory (allowed values: "
                         f"{', '.join(rows)})")
    return rows


def given_pair(results: dict[str, CellResult], row: str, good: str | None, bad: str | None,
               found: Any, root: Path, swap: bool) -> tuple[str, str]:
    """(G, B) of `row` as --good/--bad name them, the other from the row's pair.

    Raises:
        InputError: see `chosen_pairs`.
    """
    fix = f"\n  fix: `harness culprit {shown(root)} {row}` searches between the row's " \
          "last good and first bad image"
    cells = {r.image.label: cid for cid, r in results.items() if r.row == row}
    for flag, label in (("--good", good), ("--bad", bad)):
        if label is not None and label not in cells:
            raise InputError(f"{flag} {label}: no cell of row {row} (allowed values: "
                             f"{', '.join(sorted(cells))}){fix}")
    if good is not None and good == bad:
        raise InputError(f"--good and --bad name one image ({good}): nothing differs "
                         f"between them{fix}")
    p = next((p for p in found if p.row == row), None)
    g = cells[good] if good is not None else (p.good if p is not None else None)
    b = cells[bad] if bad is not None else (p.cell if p is not None else None)
    if g is None or b is None:
        raise InputError(f"row {row} has no first bad image and last good one to "
                         "take the other from; pass both --good IMAGE and --bad IMAGE")
    if not swap:
        for flag, cid, want, words in (("--good", g, GOOD, "good"), ("--bad", b, BAD, "bad")):
            verdict = results[cid].verdict
            if verdict not in want:
                raise InputError(f"{flag} {results[cid].image.label}: its cell is "
                                 f"{verdict}, not {words}{fix}")
    return g, b


def cells_of(matrix: Matrix, ids: list[str]) -> dict[str, Cell]:
    """The matrix's cells for the sweep's cell ids.

    Raises:
        InputError: the matrix no longer has one of them.
    """
    cells = {c.id: c for c in matrix.cells}
    gone = [i for i in ids if i not in cells]
    if gone:
        raise InputError(f"{matrix.file}: no cell {', '.join(gone)} (the matrix changed "
                         "since the sweep?); pass --matrix FILE, the matrix the sweep ran")
    return {i: cells[i] for i in ids}


def gated(root: Path, matrix: Matrix, engines: Engines) -> Gated:
    """The run's cells through the gate, checked against the runtime each would run on."""
    hosts = engines.by_host or {}
    return gate(root, matrix=matrix,
                runtime=lambda c: hosts.get(c.host.label, engines.default).name)


def started(found: Gated, todo: list[tuple[str, str]], matrix: Matrix, engines: Engines,
            then: str) -> tuple[list[tuple[str, str]], dict[str, Cell]]:
    """The current pairs and their cells, with the engines started for them.

    Raises:
        InputError: see `cells_of`.
    """
    todo = current_pairs(found, todo, then)
    if not todo:
        return [], {}
    cells = cells_of(matrix, [cid for pair in todo for cid in pair])
    hold(prefetch_analysis())
    engines.start(list(cells.values()))
    return todo, cells


def current_pairs(found: Gated, todo: list[tuple[str, str]],
                  then: str) -> list[tuple[str, str]]:
    """The pairs whose G and B are current (a stale cell would name the wrong cause);
    each pair left out is said with the fix."""
    keep = []
    for g, b in todo:
        gone = found.not_current([g, b])
        if gone:
            print(f"harness: not searched, stale or not read: {'; '.join(gone)}\n  fix: "
                  f"{found.refresh} runs "
                  f"them again, then {then}", file=sys.stderr)
        else:
            keep.append((g, b))
    return keep


def nothing_to_search(root: Path, name: str, found: Gated, row: str | None) -> int:
    """Nothing to search: drop ROW's stale stored answer and exit as `harness report`
    would on those rows."""
    which = f"row {row} has no" if row is not None else "no row of this directory has a"
    answer.say(f"{which} bad image after a good one: nothing to search (pass "
               f"{'' if row is not None else 'ROW '}--good IMAGE --bad IMAGE to compare "
               "two images anyway)")
    if row is not None and drop_culprit(root, row):
        rewrite_reports(root, name, found)
    return rows_exit(root, name, found, row)


def rows_exit(root: Path, name: str, found: Gated, row: str | None) -> int:
    """How `harness report` exits on ROW's cells (every row's, with no ROW)."""
    plan = tuple(p for p in found.plan if row is None or p.row == row)
    ids = {p.id for p in plan}
    results = {k: r for k, r in found.results.items() if row is None or r.row == row}
    return report_exit(Report.from_results(
        name, results, None, root, planned=plan,
        unreadable={k: why for k, why in found.gaps.items() if k in ids},
        outdated=[k for k in found.stale if k in ids]))


def search_rows(asked: CulpritAsked, root: Path, found: Gated, matrix: Matrix,
                engines: Engines, cells: dict[str, Cell], todo: list[tuple[str, str]]
                ) -> list[CulpritOutcome]:
    """Each (G, B) pair searched, its answer written to culprit/<row>/culprit.json."""
    client = engines.hybrid_client(asked.runtime or matrix.runtime)
    progress = printer(asked.quiet)
    on = RunsOn(matrix, engines.default, progress, engines.by_host)
    outcomes: list[CulpritOutcome] = []
    rows: list[dict[str, object]] = []
    with interruptible(), engines.stopped():
        for g_id, b_id in todo:
            g, b = cells[g_id], cells[b_id]
            print(f"culprit {b.row}: G {g.image.label} ({found.results[g_id].verdict})"
                  f" vs B {b.image.label} ({found.results[b_id].verdict})", flush=True)
            make = None if client is None else docker_hybrids(client, g, b, progress)
            try:
                # A dated row is searched between its days, unless --good/--bad.
                out, data = culprit_in_run(root, on, g, b, found.results,
                                           lambda s: print(f"  {s}", flush=True), make,
                                           asked.repeats, list(asked.swap),
                                           days=asked.good is None and asked.bad is None)
            except ValueError as exc:
                raise InputError(f"--swap: {exc}") from exc
            for line in out.diff.lines():
                print(f"  {line}")
            print(f"{b.row}: {out.sentence()}", flush=True)
            # the proved change's code against explain's sites, where B has them
            code = for_row(root, found.results, b_id, data)
            for c in code:
                print(f"  code: {c.words}", flush=True)
            outcomes.append(out)
            rows.append({**out.to_dict(), "code": [c.to_json() for c in code]})
            answer.update(rows=rows)
    return outcomes


def rewrite_reports(root: Path, name: str, found: Gated) -> None:
    """The sweep's reports again, with culprit's answers; never a partial one."""
    meta = load_json_keys(root / "results.json", ("meta",)).get("meta")
    report = Report.from_results(name, found.results, meta if isinstance(meta, dict) else None,
                                 root, planned=found.plan, unreadable=found.gaps,
                                 outdated=found.stale)
    if report.missing_cells:
        return
    store = RunStore(root)
    store.lock()
    try:
        write_all(store, report)
    finally:
        store.unlock()


def exit_code(outcomes: list[CulpritOutcome]) -> int:
    """1 where a cause was named (or shown outside the packages), else 3 where no hybrid
    could run at all, 4 where the search ended without a proof, 0 where B is not bad."""
    outcomes = [o for o in outcomes if not o.not_bad]
    statuses = [o.search.status for o in outcomes if o.search is not None]
    if any(s in (FOUND, OUTSIDE) for s in statuses):
        return EXIT_REGRESSION
    searched = [o for o in outcomes if o.search is not None]
    if searched and all(o.probes and all(p.result is None or p.result.verdict == UNAVAILABLE
                                         for p in o.probes if not p.how.endswith("cell"))
                        for o in searched):
        print("harness: no hybrid could be built; see the probes' reasons above",
              file=sys.stderr)
        return EXIT_ENVIRONMENT
    if searched:
        return EXIT_UNDECIDED
    return EXIT_OK
