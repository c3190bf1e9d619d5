"""A cell's way after its run, one downward list: which comparisons a measured cell makes
possible (`Rows.ready`), then each compared (`settle`): compare (`compare`: a result, or
the rounds it needs as a `context.RoundsPlan`) -> rounds (`confirm.run_rounds`, which
runs them through the run service, `ctx.runner`, as every run is) -> decide
(`decide.with_rounds`). Each step takes the last one's value and returns its own; none
calls back up. The sweep's lane settles each `Job` here after `measure.measure` and then
stores the result; `harness bisect`, `culprit` and `days` compare their probes here
(`Sweep.compare`), and a saved run's comparison runs its plan here (`run_plan`).

A row's baseline stands as it ran; any other cell is compared with it in memory, held
until the baseline has run (maybe in another lane). Nothing here writes."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness import analysis
from harness.analysis.kinds import COMPARED_WITH, GOOD, UNAVAILABLE
from harness.analysis.records import VsBaseline
from harness.matrixfile.model import Cell, row_baselines
from harness.protocol.ingest import no_samples
from harness.result.model import CellResult
from harness.stages.compare import against_row
from harness.stages.confirm import run_rounds
from harness.stages.context import Context, Measured, RoundsPlan
from harness.stages.decide import with_rounds
from harness.thresholds import AnalysisConfig


@dataclass(frozen=True)
class Job:
    """A measured cell to compare with its row's baseline (cell and result)."""

    cell: Cell
    measured: Measured
    base: Cell
    base_result: CellResult


class Rows:
    """Each cell's row baseline, and the cells held until theirs has run. Cells whose
    baseline never ran (fail-fast) are handed back, uncompared, by `flush`."""

    def __init__(self, cells: Sequence[Cell], baseline: str | None,
                 known: Mapping[str, CellResult]):
        self.bases = row_baselines(list(cells), baseline)
        self.cells = {c.id: c for c in cells}
        # the baselines' results known so far (reused ones from the start)
        self.ran = {i: r for i, r in known.items() if self.bases.get(i) == i}
        self.waiting: dict[str, list[tuple[Cell, Measured]]] = {}
        self.lock = threading.Lock()

    def ready(self, cell: Cell, measured: Measured) -> tuple[list[CellResult], list[Job]]:
        """What `cell`'s measurement makes ready: the results that stand as they ran (a
        baseline's own), and the comparisons to settle, in order (those held for it as
        their baseline; another cell's once its baseline ran, none while it waits)."""
        base_id = self.bases.get(cell.id, cell.id)
        with self.lock:
            if base_id == cell.id:
                self.ran[cell.id] = measured.result
                held = self.waiting.pop(cell.id, [])
                return [measured.result], [Job(c, m, cell, measured.result) for c, m in held]
            base_result = self.ran.get(base_id)
            if base_result is None:
                self.waiting.setdefault(base_id, []).append((cell, measured))
                return [], []
        return [], [Job(cell, measured, self.cells[base_id], base_result)]

    def flush(self) -> list[CellResult]:
        """The cells still waiting for a baseline that did not run, uncompared, said so."""
        with self.lock:
            held = [not_compared(m.result, self.cells[base].image.label, "did not run")
                    if m.result.verdict in COMPARED_WITH else m.result
                    for base, waiting in self.waiting.items() for _, m in waiting]
            self.waiting.clear()
        return held


def not_compared(res: CellResult, base: str, why: str) -> CellResult:
    """A cell whose row's baseline gave nothing to compare with, its words saying so and
    what would compare it (issue 87: "vs baseline: pending", then nothing)."""
    said = (f"not compared: the baseline {base} {why}; `baseline: <image>` in the "
            "matrix compares the row with another image")
    return dataclasses.replace(res, reason=f"{res.reason}; {said}" if res.reason else said)


# The words of a baseline's verdict that leaves nothing to compare with.
_WHY = {"crash": "crashed", "unavailable": "was unavailable", "timeout": "timed out",
        "oom": "ran out of memory", "not-applicable": "cannot run here"}


def run_plan(ctx: Context, out: CellResult | RoundsPlan) -> CellResult:
    """A comparison's result; where it planned rounds, the rounds run and the result
    decided with them."""
    if isinstance(out, RoundsPlan):
        return with_rounds(ctx.cfg, out, run_rounds(ctx, out))
    return out


def settle(ctx: Context, job: Job) -> CellResult:
    """The job's final result: compared with its row's baseline (a resumed or cached
    baseline's samples read once, here), its rounds run, decided; said in one line.
    Nothing is written here."""
    res, base_result = job.measured.result, job.base_result
    if res.verdict == UNAVAILABLE:
        return res      # a cell that could not be had stands as it ran
    if base_result.verdict not in COMPARED_WITH:
        # a baseline with nothing to compare with: it stands as it ran, said so where a
        # comparison would have been made (not of a cell that crashed itself)
        if res.verdict not in COMPARED_WITH:
            return res
        why = _WHY.get(base_result.verdict, f"ended {base_result.verdict}")
        out = not_compared(res, job.base.image.label, why)
        ctx.progress(f"{job.cell.id}: not compared: the baseline {job.base.image.label} "
                     f"{why}")
        return out
    out = run_plan(ctx, against_row(ctx.cfg, job.cell, job.measured, job.base, base_result,
                                    ctx.series(job.base.id) or no_samples(),
                                    job.base.image.label))
    vs = out.vs_baseline
    if res.verdict in GOOD or (vs is not None and vs.confirmation is not None):
        said = (f"{out.verdict} ({out.reason})" if out.verdict != res.verdict
                else vs_text(vs, ctx.cfg))
        ctx.progress(f"{job.cell.id} vs {job.base.image.label}: {said}")
    return out


def vs_text(vs: VsBaseline | None, cfg: AnalysisConfig) -> str:
    """What the comparison with the row's baseline found, in words."""
    if vs is not None and vs.confirmation is not None:
        return vs.confirmation.reason   # starts with what the rounds decided
    if vs is not None and vs.steps is not None:
        s = vs.steps
        return (f"no change: pooled steps {s.ratio:.2f}x (p={s.p_value:.2g}), "
                f"{analysis.unchanged_because(s, cfg)}")
    return "no step times"
