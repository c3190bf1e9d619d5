"""Which comparison a measured cell makes possible. A row's baseline is settled as it
ran; any other cell is compared with it in memory, held until the baseline has run
(maybe in another lane). `Rows.ready` hands the lane the comparisons a cell's
measurement makes possible (its own, and those of the cells held for it as their
baseline), each as a `Job` the way settles (`way.settle`: compare -> rounds -> decide)
and the lane then stores, once. Nothing here runs, decides or writes."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.matrixfile.model import Cell, row_baselines
from harness.result.model import CellResult
from harness.stages.context import Measured


@dataclass(frozen=True)
class Job:
    """A measured cell ready to settle: with its row's baseline (cell and result), or
    without one (a row's baseline, or a cell whose baseline never ran)."""

    cell: Cell
    measured: Measured
    base: Cell | None = None
    base_result: CellResult | None = None


class Rows:
    """Each cell's row baseline, and the cells held until theirs has run. Cells whose
    baseline never ran (fail-fast) are handed back, uncompared, by `flush`."""

    def __init__(self, cells: Sequence[Cell], baseline: str | None,
                 known: Mapping[str, CellResult]):
        self.bases = row_baselines(list(cells), baseline)
        self.cells = {c.id: c for c in cells}
        # the baselines' results known so far (reused ones from the start)
        self.ran = {i: r for i, r in known.items() if self.bases.get(i) == i}
        self.waiting: dict[str, list[Job]] = {}
        self.lock = threading.Lock()

    def ready(self, cell: Cell, measured: Measured) -> list[Job]:
        """The jobs `cell`'s measurement makes ready, in the order to settle them: a
        baseline's own, then those held for it; another cell's once its baseline ran
        (none while it waits)."""
        base_id = self.bases.get(cell.id, cell.id)
        with self.lock:
            if base_id == cell.id:
                self.ran[cell.id] = measured.result
                held = self.waiting.pop(cell.id, [])
                return [Job(cell, measured)] + [Job(j.cell, j.measured, cell, measured.result)
                                                for j in held]
            base_result = self.ran.get(base_id)
            if base_result is None:
                self.waiting.setdefault(base_id, []).append(Job(cell, measured))
                return []
        return [Job(cell, measured, self.cells[base_id], base_result)]

    def flush(self) -> list[Job]:
        """The cells still waiting for a baseline that did not run, uncompared."""
        with self.lock:
            held = [j for waiting in self.waiting.values() for j in waiting]
            self.waiting.clear()
        return held
