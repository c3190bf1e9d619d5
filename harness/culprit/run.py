"""`culprit.plan` run inside a sweep's results directory: probes in culprit/<row>/,
the answer in culprit.json with the run keys it rests on, so a reader can tell when it
no longer holds. `harness culprit` and `sweep --find-cause` both search through it."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.analysis.kinds import BAD
from harness.answers.search import free_of
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
