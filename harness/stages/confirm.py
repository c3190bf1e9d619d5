"""Stage: run the rounds a comparison planned, a suspected change run again in
interleaved rounds: B S B S ... (the `rounds` setting).

`compare.against_baseline` returns a `context.RoundsPlan` when the pooled step-time
comparison of a cell with its baseline leaves a doubt (a good cell slower or faster,
or a busy host; a leak slower: `analysis.decision.rounds_for`); the way
(`way.settle`, in the cell's lane right after it ran; `harness bisect`'s probes and a
saved run's comparison alike) hands it to `run_rounds` and what they found to
`decide.with_rounds`. Each round runs the baseline cell and then the suspect cell afresh, shorter
than the cells themselves (half their measured calls, 50..1000; a leak's without the
1,000 cap; never past `--iterations`), into
`cells/<suspect>/rounds/<k>-baseline|suspect/`; the verdict is then taken from the
rounds (`harness.analysis.baseline.decide_rounds`). Rounds run
until the answer is settled (`harness.analysis.baseline.settled`: the interval clears
the threshold, or lies wholly on its no-change side, or usable rounds disagree; a
sequential rule, `benchmarks/rounds_cost.py`), at least two usable ones and at
most twice `rounds` in all; rounds that ran on a busy host are left out and replaced,
unless CPU time per step agrees with the wall clock (`harness.analysis.baseline.judged`).
After a busy round the next waits 1, 2, 4, 8 s: a burst of load passes (no wait, and no
round, once the rounds left cannot give two usable ones). What the
rounds cost (rounds, runs, seconds) is said in the confirmation's reason.

Interleaved rounds run both cells under the allocator a user's interpreter runs with
(`round_cell`'s `as_user`: the quiet heap's settings are for the heap's readings, and
change what a step that allocates costs); a saved run's rounds run as the saved run did.
Each cell's round runs at least `compare.ROUND_S` seconds of its own steps (as pyperf
calibrates its loops), so a cheap step's median is not one of a few hundred
microseconds.

Each run's statistic is its median step time net of the run-queue delay the agent
measured, with the CPU part put at the round's common CPU speed (the agent's canary
loop; `harness.analysis.stepreading.speed_scaled`). Each round records the GPU's median
SM clock of both runs beside the CPU speed, where NVML gave it.

A saved run (`api.saved`) is confirmed by the same loop: its code is gone, so each
round runs the suspect alone against the saved run's statistic.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

from harness import analysis
from harness.analysis.records import Confirmation, Round
from harness.matrixfile.model import Cell
from harness.stages.compare import MAX_CALLS
from harness.stages.context import Context, RoundsPlan

if TYPE_CHECKING:
    from pathlib import Path

    from harness.analysis.stepreading import RunStat
    from harness.protocol.series import Series
    from harness.runtimes.base import ImageInfo

    # (step time statistic, busy share, why it failed) of one run in a round
    RunRead = tuple[RunStat | None, float | None, str | None]

MIN_CALLS = 50
BACKOFF_S, MAX_BACKOFF_S = 1.0, 8.0


def round_cell(cell: Cell, measured: int, cap: int | None = MAX_CALLS,
               as_user: bool = False, least: int = 0) -> Cell:
    """The cell as a confirmation run: fixed, shorter length (half `measured`, at least
    `MIN_CALLS`, at most `cap` where one is given; at least `least`, a cheap step's
    `compare.ROUND_S` seconds of steps; at most the calls `--iterations` asked,
    `asked_calls`), no early stop or repeats. `as_user`: under the allocator the
    user's interpreter runs with (pymalloc, glibc's thread cache on, as the matrix's
    `env:` sets them), not the quiet heap's settings, which only the heap's readings
    need: a round reads time alone, and `sorted(range(2000, 0, -1))` takes 2.4x as long
    under PYTHONMALLOC=malloc with the thread cache off; and without heap readings
    (`time_only`), whose malloc_trim makes a cheap step that allocates fault its pages
    in again after each."""
    s = cell.settings
    calls = max(MIN_CALLS, (measured or s.agent_iterations) // 2)
    if cap is not None:
        calls = min(cap, calls)
    calls = max(calls, least)
    if s.asked_calls is not None:
        calls = min(s.asked_calls, calls)
    short = dataclasses.replace(s, iterations=calls, max_iterations=None,
                                warmup=min(s.warmup, calls), repeats=0)
    if as_user:
        short = dataclasses.replace(short, pythonmalloc=False, heap="stock", time_only=True)
    return cell.with_settings(short)


def _run(ctx: Context, cell: Cell, info: ImageInfo, outdir: Path, role: str) -> RunRead:
    """(step time statistic, busy share, failure) of one confirmation run."""
    ran = ctx.runner.run(cell, info, outdir)
    ended, series = ran.ended, ran.series
    stat = analysis.run_stat(series)
    if ended.error or ended.timed_out or ended.exit_code not in (0, None) or not stat:
        why = ended.error or ("timed out" if ended.timed_out else
                              f"exit {ended.exit_code}" if ended.exit_code not in (0, None)
                              else "no step times")
        return None, None, f"{role} run failed: {why}"
    return stat, analysis.busy_share(series), None


def _saved(series: Series) -> RunRead:
    """A saved run read as every round's baseline run."""
    stat = analysis.run_stat(series)
    return (stat, analysis.busy_share(series),
            None if stat else "the saved run has no step times")


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


def run_rounds(ctx: Context, plan: RoundsPlan) -> Confirmation:
    """Run the rounds `plan` asks for until settled, and decide from them: each round
    runs `plan.runs.base` afresh (a cell; B S B S) or reads it (a saved run's samples,
    whose code is gone: only the suspect runs again), then the suspect, each through
    the run service (`ctx.runner`) as every run of a cell is, shorter (`round_cell`, at most
    `plan.cap` calls). `ctx` gives the runtime, images, store, cancel flag, progress
    and thresholds; nothing here decides the cell's verdict (`decide.with_rounds`)."""
    runs, pooled, label, cap = plan.runs, plan.pooled, plan.label, plan.cap
    assert runs is not None, "a plan whose rounds cannot run is recalled, not run"
    cfg, steps, rounds = ctx.cfg, pooled.steps, pooled.rounds
    assert steps is not None, "rounds confirm a pooled step-time comparison"
    cell, base, suspected = runs.suspect, runs.base, steps.direction
    # Interleaved rounds run both cells as the user's interpreter would (`as_user`); a
    # saved run's rounds as it ran, since its statistic was read under its settings.
    as_user = isinstance(base, Cell)
    short = round_cell(cell, runs.calls, cap, as_user, plan.least[1])
    if isinstance(base, Cell):
        if suspected == "~" and not ctx.busy_said.is_set():
            # Said once a sweep: every later cell on this host is as busy.
            ctx.busy_said.set()
            ctx.progress(f"host busy: {pooled.busy:.0%} run-queue delay in {cell.id} or "
                         "its baseline; unchanged-looking cells are confirmed in "
                         "interleaved rounds")
        short_base = round_cell(base, runs.calls, cap, as_user, plan.least[0])
        how = "interleaved rounds"

        def baseline(k: int) -> RunRead:
            return _run(ctx, short_base, ctx.images.get(short_base),
                        runs.home / "rounds" / f"{k}-baseline", "baseline")
    else:
        saved = _saved(base)
        how = "rounds of this run against the saved one"

        def baseline(k: int) -> RunRead:
            return saved
    what = f"suspected {suspected}" if suspected != "~" else "host busy"
    ctx.progress(f"{cell.id} vs {label}: {analysis.pooled_text(steps, label)}, {what}; "
                 "confirming in "
                 f"{how} (2 to {2 * rounds}, until settled)")
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
        b_med, b_busy, b_fail = baseline(k)
        o_med, o_busy, o_fail = _run(ctx, short, runs.info,
                                     runs.home / "rounds" / f"{k}-suspect", "suspect")
        j = analysis.judged(b_med, o_med, b_busy, o_busy, cfg, failed=b_fail or o_fail or "")
        why = j.left_out
        r = Round(k, j.base_s, j.other_s, b_busy, o_busy, why, j.speed,
                  *analysis.sm_clocks(b_med, o_med), cpu_ratio=j.cpu, rule=j.rule)
        done.append(r)
        ctx.progress(round_said(cell.id, label, r, why, j.note))
        more = k < most and usable(done) + (most - k) >= 2
        if why and why.startswith("host busy") and more:
            # A load burst passes: wait a little longer after each busy round (never
            # after the last round that can run: nothing would use the wait).
            ctx.cancel.wait(min(BACKOFF_S * 2 ** (k - 1), MAX_BACKOFF_S))
        if ctx.cancel.is_set():
            break
    return with_cost(analysis.decide_rounds(done, suspected, cfg), done, started,
                     f"({2 * len(done)} runs)" if isinstance(base, Cell)
                     else "of this run against the saved one")
