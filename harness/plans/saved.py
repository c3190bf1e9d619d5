"""A cell against a saved run of an earlier version of its code (the pytest plugin's
`--harness-compare NAME`, `harness.api.check(..., baseline=...)`).

The same comparison as a sweep row's (`stages.rows.compare`): the pooled step times,
peaks and CPU times (`analysis.pooled.baseline_facts`), then, where they leave a
doubt (a suspected change, a busy host), rounds that must confirm it, and the verdict
from the one table (`analysis.decision.decide`).

What cannot be the same: a sweep's rounds run baseline and suspect alternately
(B S B S), so drift of the host hits both alike. A saved run's code is gone (it was
another commit), so it cannot run again: here each round runs the current cell afresh
(shorter, as `stages.confirm.round_cell` makes it) and compares its statistic with the
saved run's (`analysis.contention.run_stat`, both put at one CPU speed by the agent's
canary loop: `speed_scaled`), and `analysis.rounds.decide_rounds` decides over the
rounds, as it does in a sweep (every usable round must agree, and the interval clear
`min_ratio`). A change that came from a burst of load in the first run does not come
back in its rounds; a host that is slower throughout than when the run was saved (a
loaded CI machine, another CPU) is corrected only as far as the canary sees it: save
and compare on the same machine.
"""

from __future__ import annotations

import dataclasses
import time

from harness.analysis.contention import busy_share, run_stat, sm_clocks
from harness.analysis.decision import CellFacts, decide, needs_rounds, pooled_text
from harness.analysis.kinds import GOOD
from harness.analysis.pooled import baseline_facts
from harness.analysis.rounds import decide_rounds, judged, settled
from harness.analysis.vsbaseline import Confirmation, Direction, Round
from harness.matrixfile.model import Cell
from harness.protocol.series import Series
from harness.result.model import CellResult
from harness.stages.attempts import emptied, execute
from harness.stages.confirm import round_cell, round_said, usable, with_cost
from harness.stages.context import Context, Measured
from harness.stages.rows import round_length, with_verdict


def against_saved(ctx: Context, cell: Cell, measured: Measured, saved: CellResult,
                  saved_series: Series, label: str) -> CellResult:
    """`measured` (a run of `cell`) against the saved run `saved`, its verdict decided
    with the comparison; nothing is written."""
    res, cfg = measured.result, ctx.cfg
    facts = baseline_facts(cfg, saved_series, measured.series, label, cell.settings.rounds,
                           good=res.verdict in GOOD)
    steps = facts.steps
    if res.verdict in GOOD and steps is not None and needs_rounds(facts, cfg):
        what = f"suspected {steps.direction}" if steps.direction != "~" else "host busy"
        ctx.progress(f"{cell.id} vs {label}: {pooled_text(steps, label)}, {what}; "
                     f"confirming in rounds of this run against the saved one "
                     f"(2 to {2 * cell.settings.rounds}, until settled)")
        calls = round_length(cell, len(measured.series.cols.steps),
                             [r.summary.median_step_s for r in (res, saved)])
        facts = dataclasses.replace(facts, confirmation=rounds_against(
            ctx, cell, saved_series, steps.direction, cell.settings.rounds, calls, label))
    verdict = decide(CellFacts(cfg, baseline=facts, within=measured.verdict))
    return with_verdict(res, verdict)


def rounds_against(ctx: Context, cell: Cell, saved_series: Series, suspected: Direction,
                   rounds: int, measured: int, label: str) -> Confirmation:
    """Rounds of `cell`, each a fresh short run against the saved run's statistic,
    decided as a sweep's rounds are (`stages.confirm.confirm`'s loop, without the
    baseline's runs: the saved one is the baseline of every round)."""
    cfg = ctx.cfg
    base = run_stat(saved_series)
    base_busy = busy_share(saved_series)
    short = round_cell(cell, measured)
    done: list[Round] = []
    started = time.monotonic()
    k, most = 0, 2 * max(rounds, 1)
    while k < most and not settled(decide_rounds(done, suspected, cfg), cfg):
        if usable(done) + (most - k) < 2:
            break
        k += 1
        outdir = emptied(ctx.store.cell_dir(cell.id) / "rounds" / f"{k}-suspect")
        ran = execute(ctx, short, ctx.image(short), outdir)
        stat = run_stat(ran.series)
        ended = ran.ended
        failed = (ended.error or ended.timed_out or ended.exit_code not in (0, None)
                  or stat is None)
        busy = busy_share(ran.series)
        j = judged(base, stat, base_busy, busy, cfg, failed=(
            f"suspect run failed: {ended.error or 'no step times'}" if failed
            else "the saved run has no step times" if base is None else ""))
        why = j.left_out
        r = Round(k, j.base_s, j.other_s, base_busy, busy, why, j.speed,
                  *sm_clocks(base, stat), cpu_ratio=j.cpu, rule=j.rule)
        done.append(r)
        ctx.progress(round_said(cell.id, label, r, why, j.note))
        if ctx.cancel.is_set():
            break
    return with_cost(decide_rounds(done, suspected, cfg), done, started,
                     "of this run against the saved one")
