"""Compare with the row, then store: each cell of a sweep is settled once. A row's
baseline is written as soon as it ran; any other cell is compared with it in memory
(waiting for it if it has not run yet; confirmation rounds where the pooled test leaves
a doubt), then written, once (`cells/<id>/result.json`), with the verdict that settled
it (`with_verdict`). A saved run's comparison and `--reanalyze` compare theirs the same
way (`against_baseline`)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from harness import analysis
from harness.analysis.kinds import COMPARED_WITH, GOOD, UNAVAILABLE
from harness.analysis.vsbaseline import Baseline, Confirmation, VsBaseline
from harness.matrixfile.model import Cell, row_baselines
from harness.protocol.ingest import no_samples
from harness.result.model import CellResult
from harness.stages.confirm import MAX_CALLS, confirm
from harness.stages.context import Context, Measured
from harness.thresholds import AnalysisConfig

if TYPE_CHECKING:
    from harness.analysis.verdict import CellVerdict
    from harness.protocol.series import Series


def round_length(cell: Cell, measured: int, step_s: list[float | None]) -> int:
    """The calls that set the confirmation rounds' length (`confirm.round_cell` runs
    half of them): the suspect's measured calls, and for a budgeted cell no more than
    its budget holds at the slower of the two cells' step times, so that each round's
    run takes about half the budget (a slow step's budgeted run goes past its budget
    to its least calls; rounds of half that would take minutes)."""
    budget = cell.settings.run_budget
    slowest = max((s for s in step_s if s), default=0.0)
    if budget is None or slowest <= 0:
        return measured
    return min(measured, int(budget / slowest))


def compare(ctx: Context, cell: Cell, measured: Measured, base: Cell, base_result: CellResult
            ) -> CellResult:
    """The cell against its row's baseline, in memory (`against_baseline`, with
    interleaved rounds where the pooled comparison leaves a doubt). Nothing is written
    here."""
    res, cfg = measured.result, ctx.cfg
    if base_result.verdict not in COMPARED_WITH or res.verdict == UNAVAILABLE:
        return res
    label = base.image.label

    def rounds(facts: Baseline) -> Confirmation:
        steps = facts.steps
        if steps is not None and steps.direction == "~" and not ctx.busy_said.is_set():
            # Said once a sweep: every later cell on this host is as busy.
            ctx.busy_said.set()
            ctx.progress(f"host busy: {facts.busy:.0%} run-queue delay in {cell.id} or its "
                         "baseline; unchanged-looking cells are confirmed in interleaved "
                         "rounds")
        return confirm(ctx, base, cell, facts, round_length(
            cell, len(measured.series.cols.steps),
            [r.summary.median_step_s for r in (res, base_result)]), label,
            MAX_CALLS if res.verdict in GOOD else None)

    # A resumed or cached baseline's samples are read once, here.
    out = against_baseline(cfg, res, measured.verdict, ctx.series(base.id) or no_samples(),
                           measured.series, label, cell.settings.rounds, rounds)
    if res.verdict in GOOD or (out.vs_baseline is not None
                               and out.vs_baseline.confirmation is not None):
        said = (f"{out.verdict} ({out.reason})" if out.verdict != res.verdict
                else vs_text(out.vs_baseline, cfg))
        ctx.progress(f"{cell.id} vs {label}: {said}")
    return out


def against_baseline(cfg: AnalysisConfig, res: CellResult, within: CellVerdict,
                     base_series: Series, series: Series, label: str, rounds: int,
                     confirming: Callable[[Baseline], Confirmation | None]) -> CellResult:
    """`res` (within-run verdict `within`, samples `series`) against a baseline's
    samples: the pooled comparison (`analysis.pooled.baseline_facts`), the rounds
    `confirming` runs (or recalls) where it leaves a doubt, and the verdict from the one
    table. A sweep's row, a saved run (`plans.saved`) and `--reanalyze` all compare
    here."""
    facts = analysis.baseline_facts(cfg, base_series, series, label, rounds,
                           good=res.verdict in GOOD)
    # A good cell's doubt, or a leak whose steps read slower (`rounds_for`).
    if facts.steps is not None and analysis.rounds_for(res.verdict, facts, cfg):
        facts = dataclasses.replace(facts, confirmation=confirming(facts))
    return with_verdict(res, analysis.decide(analysis.CellFacts(cfg, baseline=facts,
                                                                within=within)))


def vs_text(vs: VsBaseline | None, cfg: AnalysisConfig) -> str:
    """What the comparison with the row's baseline found, in words."""
    if vs is not None and vs.confirmation is not None:
        return vs.confirmation.reason   # starts with what the rounds decided
    if vs is not None and vs.steps is not None:
        s = vs.steps
        return (f"no change: pooled steps {s.ratio:.2f}x (p={s.p_value:.2g}), "
                f"{analysis.unchanged_because(s, cfg)}")
    return "no step times"


class RowComparisons:
    """Settles each cell once: compared with its row's baseline (held until that has
    run), then stored. Cells whose baseline never ran (fail-fast) are written as they
    are by `flush`."""

    def __init__(self, ctx: Context, cells: Sequence[Cell], baseline: str | None,
                 results: dict[str, CellResult]):
        self.ctx = ctx
        self.bases = row_baselines(list(cells), baseline)
        self.cells = {c.id: c for c in cells}
        self.results = results      # final results, shared with the SweepOutcome
        self.waiting: dict[str, list[tuple[Cell, Measured]]] = {}
        self.lock = threading.Lock()

    def compared(self, cell: Cell) -> bool:
        return self.bases.get(cell.id, cell.id) != cell.id

    def settle(self, cell: Cell, measured: Measured) -> None:
        ctx = self.ctx
        ctx.series.keep(cell.id, measured.series)
        base_id = self.bases.get(cell.id, cell.id)
        if base_id == cell.id:
            self._store(cell.id, measured.result)
            with self.lock:
                held = self.waiting.pop(cell.id, [])
            for other, m in held:
                self._store(other.id, compare(ctx, other, m, cell, measured.result))
            return
        with self.lock:
            base_result = self.results.get(base_id)
            if base_result is None:
                self.waiting.setdefault(base_id, []).append((cell, measured))
                return
        self._store(cell.id, compare(ctx, cell, measured, self.cells[base_id], base_result))

    def flush(self) -> None:
        """Write the cells still waiting for a baseline that did not run."""
        with self.lock:
            held = [x for waiting in self.waiting.values() for x in waiting]
            self.waiting.clear()
        for cell, measured in held:
            self._store(cell.id, measured.result)

    def _store(self, cell_id: str, result: CellResult) -> None:
        self.ctx.store.write_cell(result)
        with self.lock:
            self.results[cell_id] = result


def with_verdict(res: CellResult, verdict: CellVerdict) -> CellResult:
    """`res` with the verdict and every number behind it taken from `verdict` (each
    field the two share: a field added to both is carried without a change here)."""
    mine = {f.name for f in dataclasses.fields(CellResult)}
    given = {f.name: getattr(verdict, f.name) for f in dataclasses.fields(verdict)
             if f.name in mine}
    for name, value in given.items():
        if isinstance(value, list):
            given[name] = tuple(value)
        elif isinstance(value, dict):
            given[name] = dict(value)
    return dataclasses.replace(res, **given)
