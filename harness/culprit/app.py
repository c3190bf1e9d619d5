"""`harness culprit`'s work: choose and gate the pairs, search each in its row's
culprit/ folder, rewrite the reports and return the exit code; and `culprit.plan` run
inside a sweep's results directory (`culprit_in_run`: probes in culprit/<row>/, the answer
in culprit.json with the run keys it rests on, so a reader can tell when it no longer
holds), through which `harness culprit`, `sweep --find-cause` and `--between` search."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.analysis.kinds import BAD, GOOD, UNAVAILABLE
from harness.answers.search import free_of, pairs
from harness.app import answer
from harness.app.command import exit_code as report_exit
from harness.app.command import hold, printer
from harness.culprit.changes import for_row
from harness.culprit.plan import culprit, docker_hybrids, sweep_runner
from harness.culprit.search import FOUND, OUTSIDE
from harness.errors import (
    EXIT_ENVIRONMENT,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_UNDECIDED,
    InputError,
    interruptible,
)
from harness.matrixfile.cells import dated_cell
from harness.report import Report, write_all
from harness.result.model import DerivedFrom
from harness.runtimes import Engines
from harness.stages.orchestrator import Sweep, prefetch_analysis
from harness.store import RunStore
from harness.store.gate import gate, matrix_of, why_not_current
from harness.store.results import (
    CULPRIT_DIR,
    CULPRIT_FILE,
    DAY_DIR,
    SeriesCache,
    atomic_write_text,
    day_record,
    drop_culprit,
    load_json_keys,
)
from harness.store.runs import shown

if TYPE_CHECKING:
    from harness.culprit.plan import CulpritOutcome, Maker
    from harness.matrixfile.model import Cell, Matrix
    from harness.result.model import CellResult
    from harness.runtimes.base import Runtime
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


Say = Callable[[str], None]


@dataclass(frozen=True)
class RunsOn:
    """Where a search's probes run: the sweep's matrix, runtime(s) and progress line."""

    matrix: Matrix
    runtime: Runtime
    progress: Say
    runtimes: dict[str, Runtime] | None = None

    def runtime_for(self, cell: Cell) -> str:
        """The name of the runtime `cell` runs on (its host's, else the default)."""
        return (self.runtimes or {}).get(cell.host.label, self.runtime).name


@dataclass(frozen=True)
class End:
    """One end of a culprit search: the cell, its result, and the directory holding it."""

    cell: Cell
    result: CellResult
    where: Path


def ends(root: Path, g: Cell, b: Cell, results: Mapping[str, CellResult], runtime: str
         ) -> tuple[End, End]:
    """The last good and first bad runs: a current day search's days where it holds,
    else the sweep's G and B (packages moved outside the days are no suspects)."""
    sweep = End(g, results[g.id], root), End(b, results[b.id], root)
    data = day_record(root, b.row)
    if not isinstance(data, dict) or data.get("derived_from") != DerivedFrom.of(
            results, (g.id, b.id)).to_json():
        return sweep
    where = root / DAY_DIR / b.row
    found: list[End] = []
    for key in ("good_cell", "bad_cell"):
        cid = data.get(key)
        if cid in (g.id, b.id):
            found.append(sweep[0] if cid == g.id else sweep[1])
            continue
        result = RunStore(where).load_cell(cid) if isinstance(cid, str) else None
        day = result.image.labels.get("as_of") if result is not None else None
        if result is None or day is None:
            return sweep
        cell = dataclasses.replace(dated_cell(g, day), id=result.id)
        # the good day as the day search read it: good, or undecided on its steps alone
        # with its memory stable (`free_of`), where the fault is memory
        shown = (free_of(result, sweep[1].result.verdict) if key == "good_cell"
                 else result.verdict in BAD)
        if why_not_current(result, cell, runtime) is not None or not shown:
            return sweep
        found.append(End(cell, result, where))
    return found[0], found[1]


def culprit_in_run(root: Path, on: RunsOn, g: Cell, b: Cell,
                   results: Mapping[str, CellResult], say: Say, make: Maker | None = None,
                   repeats: int = 1, swap: Sequence[str] = (), days: bool = True
                   ) -> tuple[CulpritOutcome, dict[str, object]]:
    """Search between G and B with probes in root/culprit/<row>/; the outcome and its
    culprit.json. `days`: between the day search's days where known (not with swap, make).

    Raises: StoreError: culprit/<row>/ is locked; ValueError: `swap` names an unchanged package.
    """
    good, bad = (End(g, results[g.id], root), End(b, results[b.id], root))
    if days and not swap and make is None:
        good, bad = ends(root, g, b, results, on.runtime_for(g))
        if (good.result.id, bad.result.id) != (g.id, b.id):
            say(f"between the day search's last good and first bad day: G "
                f"{good.result.image.label} and B {bad.result.image.label} (not "
                f"{g.image.label} and {b.image.label})")
    store = RunStore(root / CULPRIT_DIR / b.row)
    store.lock()
    try:
        sweep = Sweep(on.matrix, on.runtime, store, on.progress, on.runtimes)
        runner = sweep_runner(sweep, good.cell, good.result,
                              SeriesCache(good.where)(good.result.id))
        out = culprit(good.cell, good.result, bad.cell, bad.result, runner, say, repeats,
                      make, swap)
        data: dict[str, object] = {**out.to_dict(), "derived_from": DerivedFrom.of(
            results, (g.id, b.id)).to_json(), "searched": DerivedFrom.of(
            {e.result.id: e.result for e in (good, bad)},
            (good.result.id, bad.result.id)).to_json()}
        atomic_write_text(store.root / CULPRIT_FILE, json.dumps(data, indent=1) + "\n")
    finally:
        store.unlock()
    return out, data
