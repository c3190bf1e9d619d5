"""A cell's way after its run, one downward list: compare (`compare`: a result, or the
rounds it needs as a `context.RoundsPlan`) -> rounds (`confirm.run_rounds`, which runs
them through `execute.execute` as every run is) -> decide (`decide.with_rounds`). Each
step takes the last one's value and returns its own; none calls back up. The sweep's
lane settles each `rows.Job` here after `measure.measure` and then stores the result;
`harness bisect`, `culprit` and `days` compare their probes here (`Sweep.compare`), and
a saved run's comparison runs its plan here (`run_plan`)."""

from __future__ import annotations

from harness import analysis
from harness.analysis.kinds import COMPARED_WITH, GOOD, UNAVAILABLE
from harness.analysis.vsbaseline import VsBaseline
from harness.protocol.ingest import no_samples
from harness.result.model import CellResult
from harness.stages.compare import against_row
from harness.stages.confirm import run_rounds
from harness.stages.context import Context, RoundsPlan
from harness.stages.decide import with_rounds
from harness.stages.rows import Job
from harness.thresholds import AnalysisConfig


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
    if (job.base is None or base_result is None or base_result.verdict not in COMPARED_WITH
            or res.verdict == UNAVAILABLE):
        # a row's baseline, a cell whose baseline never ran or has nothing to compare
        # with, or a cell that could not be had: it stands as it ran
        return res
    out = run_plan(ctx, against_row(ctx.cfg, job.cell, job.measured, job.base, base_result,
                                    ctx.series(job.base.id) or no_samples()))
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
