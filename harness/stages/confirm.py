"""Run a suspected change again in interleaved rounds: B S B S ... (the `rounds` setting).

`rows.compare` (in a sweep, and in `harness bisect`, whose probes are compared with
the first image the same way) calls `confirm` when the pooled step-time comparison of
a cell with its row's baseline leaves a doubt (slower or faster, or a busy host), in
the cell's lane right after it ran. Each round runs the baseline cell and
then the suspect cell afresh, shorter than the cells themselves (half their measured
calls, 50..1000), into `cells/<suspect>/rounds/<k>-baseline|suspect/`; the verdict is
then taken from the rounds (`harness.analysis.rounds.decide_rounds`). Rounds run
until the answer is settled (`harness.analysis.rounds.settled`: the interval clears
the threshold, or lies wholly on its no-change side, or usable rounds disagree; a
sequential rule, `benchmarks/rounds_cost.py`), at least two usable ones and at
most twice `rounds` in all; rounds that ran on a busy host are left out and replaced,
unless CPU time per step agrees with the wall clock (`harness.analysis.rounds.judged`).
After a busy round the next waits 1, 2, 4, 8 s: a burst of load passes (no wait, and no
round, once the rounds left cannot give two usable ones). What the
rounds cost (rounds, runs, seconds) is said in the confirmation's reason.

Each run's statistic is its median step time net of the run-queue delay the agent
measured, with the CPU part put at the round's common CPU speed (the agent's canary
loop; `harness.analysis.contention.speed_scaled`). Each round records the GPU's median
SM clock of both runs beside the CPU speed, where NVML gave it.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

from harness import analysis
from harness.analysis.vsbaseline import Confirmation, Direction, Round
from harness.matrixfile.model import Cell
from harness.stages.attempts import emptied, execute
from harness.stages.context import Context

if TYPE_CHECKING:
    from harness.analysis.contention import RunStat

MIN_CALLS, MAX_CALLS = 50, 1000
BACKOFF_S, MAX_BACKOFF_S = 1.0, 8.0


def round_cell(cell: Cell, measured: int) -> Cell:
    """The cell as a confirmation run: fixed, shorter length, no early stop or repeats."""
    s = cell.settings
    calls = max(MIN_CALLS, min(MAX_CALLS, (measured or s.agent_iterations) // 2))
    short = dataclasses.replace(s, iterations=calls, max_iterations=None,
                                warmup=min(s.warmup, calls), repeats=0)
    return dataclasses.replace(cell, scenario=dataclasses.replace(cell.scenario, settings=short))


def _run(ctx: Context, cell: Cell, suspect: Cell, k: int, role: str
         ) -> tuple[RunStat | None, float | None, str | None]:
    """(step time statistic, busy share, failure) of one confirmation run."""
    outdir = emptied(ctx.store.cell_dir(suspect.id) / "rounds" / f"{k}-{role}")
    ran = execute(ctx, cell, ctx.image(cell), outdir)
    ended, series = ran.ended, ran.series
    stat = analysis.run_stat(series)
    if ended.error or ended.timed_out or ended.exit_code not in (0, None) or not stat:
        why = ended.error or ("timed out" if ended.timed_out else f"exit {ended.exit_code}")
        return None, None, f"{role} run failed: {why}"
    return stat, analysis.busy_share(series), None


def usable(done: list[Round]) -> int:
    """Rounds that count: not left out, both medians measured."""
    return sum(r.excluded is None and r.base_s > 0 and r.other_s > 0 for r in done)


def round_said(cell_id: str, label: str, r: Round, why: str | None, note: str = "") -> str:
    """A round's progress line: its ratio, what it was measured at, why it is out."""
    return (f"{cell_id} vs {label}: round {r.index}: "
            + (f"{r.ratio:.2f}x" if r.base_s and r.other_s else "-")
            + (f" (CPU speed {r.speed:.2f}x the baseline's)" if r.speed else "")
            + (f" (GPU clock {r.base_sm_mhz:.0f} / {r.other_sm_mhz:.0f} MHz)"
               if r.base_sm_mhz and r.other_sm_mhz else "")
            + (f" ({note})" if note and not why else "")
            + (f" (left out: {why})" if why else ""))


def with_cost(found: Confirmation, done: list[Round], started: float, what: str
              ) -> Confirmation:
    """The rounds' decision with what they cost said: "...; 3 rounds (6 runs) in 4.1 s"."""
    cost = time.monotonic() - started
    return dataclasses.replace(found, seconds=round(cost, 3), reason=(
        f"{found.reason}; {len(done)} round{'s' if len(done) != 1 else ''} {what} in "
        f"{cost:.1f} s"))


def confirm(ctx: Context, base: Cell, cell: Cell, suspected: Direction, rounds: int,
            measured: int) -> Confirmation:
    """Run `rounds` interleaved baseline/suspect rounds and decide from them.

    Args:
        ctx: Supplies the runtime, image, store, cancel flag, progress and config.
        base: The row's baseline cell.
        cell: The suspect cell.
        suspected: The pooled comparison's direction ("slower" or "faster").
        rounds: How many usable rounds to get (>= 1).
        measured: Calls the suspect cell measured (sets the rounds' length).
    """
    cfg = ctx.cfg
    runs = (round_cell(base, measured), round_cell(cell, measured))
    done: list[Round] = []
    k = 0
    started = time.monotonic()
    most = 2 * rounds
    while k < most:
        if analysis.settled(analysis.decide_rounds(done, suspected, cfg), cfg):
            break   # decided either way, or the rounds disagree: more cannot change it
        if usable(done) + (most - k) < 2:
            break   # the rounds left cannot give the two usable ones a decision needs
        # Rounds whose interval still straddles a threshold: one more.
        k += 1
        b_med, b_busy, b_fail = _run(ctx, runs[0], cell, k, "baseline")
        o_med, o_busy, o_fail = _run(ctx, runs[1], cell, k, "suspect")
        j = analysis.judged(b_med, o_med, b_busy, o_busy, cfg, failed=b_fail or o_fail or "")
        why = j.left_out
        r = Round(k, j.base_s, j.other_s, b_busy, o_busy, why, j.speed,
                  *analysis.sm_clocks(b_med, o_med), cpu_ratio=j.cpu, rule=j.rule)
        done.append(r)
        ctx.progress(round_said(cell.id, base.image.label, r, why, j.note))
        more = k < most and usable(done) + (most - k) >= 2
        if why and why.startswith("host busy") and more:
            # A load burst passes: wait a little longer after each busy round (never
            # after the last round that can run: nothing would use the wait).
            ctx.cancel.wait(min(BACKOFF_S * 2 ** (k - 1), MAX_BACKOFF_S))
        if ctx.cancel.is_set():
            break
    return with_cost(analysis.decide_rounds(done, suspected, cfg), done, started,
                     f"({2 * len(done)} runs)")
