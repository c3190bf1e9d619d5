"""`plans.culprit` run inside a sweep's results directory: between a row's G and B, its
probes kept in culprit/<row>/ (locked while it runs) and its answer written there as
culprit.json with the run keys of G and B it rests on (`result.derived`), so a reader
(`store.answers`) can tell when it no longer holds. `harness culprit` and `sweep
--find-cause` both search through it: one writer of culprit.json."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.matrixfile.model import Cell, Matrix
    from harness.plans.culprit import CulpritOutcome, Maker
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


def culprit_in_run(root: Path, on: RunsOn, g: Cell, b: Cell,
                   results: Mapping[str, CellResult], say: Say, make: Maker | None = None,
                   repeats: int = 1, swap: Sequence[str] = ()
                   ) -> tuple[CulpritOutcome, dict[str, object]]:
    """Search G against B (`plans.culprit.culprit`) with probes in root/culprit/<row>/;
    the outcome and the culprit.json written there (its dict).

    Raises:
        StoreError: culprit/<row>/ is locked by another search.
        ValueError: `swap` names a package that did not change (`culprit`).
    """
    from harness.orchestrator import Sweep
    from harness.plans.culprit import culprit, sweep_runner
    from harness.result.derived import DerivedFrom
    from harness.store import RunStore
    from harness.store.answers import CULPRIT_DIR, CULPRIT_FILE
    from harness.store.results import SeriesCache, atomic_write_text

    store = RunStore(root / CULPRIT_DIR / b.row)
    store.lock()
    try:
        sweep = Sweep(on.matrix, on.runtime, store, on.progress, on.runtimes)
        runner = sweep_runner(sweep, g, results[g.id], SeriesCache(root)(g.id))
        out = culprit(g, results[g.id], b, results[b.id], runner, say, repeats, make, swap)
        data: dict[str, object] = {**out.to_dict(), "derived_from": DerivedFrom.of(
            results, (g.id, b.id)).to_json()}
        atomic_write_text(store.root / CULPRIT_FILE, json.dumps(data, indent=1) + "\n")
    finally:
        store.unlock()
    return out, data
