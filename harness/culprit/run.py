"""`culprit.plan` run inside a sweep's results directory: between a row's G and B, its
probes kept in culprit/<row>/ (locked while it runs) and its answer written there as
culprit.json with the run keys of G and B it rests on (`result.model`), so a reader
(`store.results`) can tell when it no longer holds. `harness culprit` and `sweep
--find-cause` both search through it: one writer of culprit.json, one choice of the two
environments (`ends`: for a dated row, the last good and first bad day the day search
found, not the axis's ends), one search (`culprit.plan.culprit`: delta debugging, no set
swapped unproved) and one install strategy (local hybrids `--no-deps` where the
resolver refuses their pins together)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.analysis.kinds import BAD, GOOD
from harness.culprit.plan import culprit, sweep_runner
from harness.matrixfile.cells import dated_cell
from harness.result.model import DerivedFrom
from harness.stages.orchestrator import Sweep
from harness.store import RunStore
from harness.store.gate import why_not_current
from harness.store.results import (
    CULPRIT_DIR,
    CULPRIT_FILE,
    DAY_DIR,
    SeriesCache,
    atomic_write_text,
    day_record,
)

if TYPE_CHECKING:
    from harness.culprit.plan import CulpritOutcome, Maker
    from harness.matrixfile.model import Cell, Matrix
    from harness.result.model import CellResult
    from harness.runtimes.base import Runtime

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
    """One end of a culprit search: the cell, its result, and the results directory
    whose cells/<id>/ holds it (the sweep's, or day/<row>/ for a day search's probe)."""

    cell: Cell
    result: CellResult
    where: Path


def ends(root: Path, g: Cell, b: Cell, results: Mapping[str, CellResult], runtime: str
         ) -> tuple[End, End]:
    """The last good and first bad environments the step before found: for a row the day
    search took (day/<row>/day.json, searched between G and B as they are now), the runs
    that stand for its last good and first bad day, each current (`why_not_current`);
    else the sweep's G and B. Never the axis's ends where the days are known: packages
    that moved between them and not between the days are no suspects."""
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
        if why_not_current(result, cell, runtime) is not None or result.verdict not in (
                GOOD if key == "good_cell" else BAD):
            return sweep
        found.append(End(cell, result, where))
    return found[0], found[1]


def culprit_in_run(root: Path, on: RunsOn, g: Cell, b: Cell,
                   results: Mapping[str, CellResult], say: Say, make: Maker | None = None,
                   repeats: int = 1, swap: Sequence[str] = (), days: bool = True
                   ) -> tuple[CulpritOutcome, dict[str, object]]:
    """Search between G and B (`culprit.plan.culprit`) with probes in
    root/culprit/<row>/; the outcome and the culprit.json written there (its dict),
    which rests on G and B (`derived_from`) and names the two runs searched between
    (`good`, `bad`, their keys in `searched`).

    `days`: where the row's day search found its last good and first bad day, search
    between those (`ends`), not between G and B; never with `swap` (names of changes
    between G and B) or `make` (container hybrids: the day search is local).

    Raises:
        StoreError: culprit/<row>/ is locked by another search.
        ValueError: `swap` names a package that did not change (`culprit`).
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
