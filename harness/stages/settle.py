"""A cell's way after its run: each comparison a measured cell makes ready (`Rows`) settled
(`settle`): compare (`against_row`) -> rounds (`run_rounds`) -> decide (`with_rounds`).
Where the pooled comparison leaves a doubt, baseline and suspect rerun in interleaved rounds
(B S B S ...) until settled, busy ones replaced. Compare and decide are pure; nothing writes.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.analysis.kinds import COMPARED_WITH, GOOD, UNAVAILABLE
from harness.analysis.records import Confirmation, Round, VsBaseline
from harness.analysis.rules import CONFIRM_ROUNDS, reach_s
from harness.matrixfile.model import Cell, row_baselines
from harness.protocol.ingest import no_samples
from harness.protocol.series import Series
from harness.result.model import CellResult
from harness.stages.context import Context, Measured, RoundsPlan, Runs, verdict
from harness.thresholds import AnalysisConfig

if TYPE_CHECKING:
    from pathlib import Path

    from harness.analysis.decision import CellVerdict
    from harness.analysis.records import Baseline
    from harness.analysis.stepreading import RunStat
    from harness.runtimes.base import ImageInfo

    # (step time statistic, busy share, why it failed) of one run in a round
    RunRead = tuple[RunStat | None, float | None, str | None]


@dataclass(frozen=True)
class Job:
    """A measured cell to compare with its row's baseline (cell and result)."""

    cell: Cell
    measured: Measured
    base: Cell
    base_result: CellResult


class Rows:
    """Each cell's row baseline, and the cells held until theirs has run."""

    def __init__(self, cells: Sequence[Cell], baseline: str | None,
                 known: Mapping[str, CellResult]):
        self.bases = row_baselines(list(cells), baseline)
        self.cells = {c.id: c for c in cells}
        # the baselines' results known so far (reused ones from the start)
        self.ran = {i: r for i, r in known.items() if self.bases.get(i) == i}
        self.waiting: dict[str, list[tuple[Cell, Measured]]] = {}
        self.lock = threading.Lock()

    def ready(self, cell: Cell, measured: Measured) -> tuple[list[CellResult], list[Job]]:
        """What `cell`'s measurement makes ready: results that stand, jobs to settle."""
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
    """A cell whose baseline gave nothing to compare with, saying so and what would."""
    said = (f"not compared: the baseline {base} {why}; `baseline: <image>` in the "
            "matrix compares the row with another image")
    return dataclasses.replace(res, reason=f"{res.reason}; {said}" if res.reason else said)


# The words of a baseline's verdict that leaves nothing to compare with.
_WHY = {"crash": "crashed", "unavailable": "was unavailable", "timeout": "timed out",
        "oom": "ran out of memory", "not-applicable": "cannot run here"}


def run_plan(ctx: Context, out: CellResult | RoundsPlan) -> CellResult:
    """A comparison's result, its planned rounds run and decided with."""
    if isinstance(out, RoundsPlan):
        return with_rounds(ctx.cfg, out, run_rounds(ctx, out))
    return out


def settle(ctx: Context, job: Job) -> CellResult:
    """The job's final result, compared with its row's baseline and said in one line."""
    res, base_result = job.measured.result, job.base_result
    if res.verdict == UNAVAILABLE:
        return res      # a cell that could not be had stands as it ran
    if base_result.verdict not in COMPARED_WITH:
        # nothing to compare with: it stands, said where a comparison was due
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
        # lazy: NumPy, with the baseline's statistics, once a first comparison is asked
        from harness.analysis import baseline

        s = vs.steps
        return (f"no change: pooled steps {s.ratio:.2f}x (p={s.p_value:.2g}), "
                f"{baseline.unchanged_because(s, cfg)}")
    return "no step times"


MAX_CALLS = 1000   # the most calls a good cell's round runs (`round_cell`) ...
# ... but at least this many seconds of its own steps (`least_calls`), as pyperf
# calibrates its loops: a cheap step's median over too short a round misleads.
ROUND_S = 0.1
MOST_LEAST = 1_000_000   # ... and at most this many for it (a step of 0.1 us: 0.1 s)
ROUND_MOST = 10          # ... in no more than this many times a measured run's seconds


def least_calls(step_s: float | None) -> int:
    """The calls that hold `ROUND_S` seconds of a step of `step_s` (0 where unknown)."""
    if not step_s or step_s <= 0:
        return 0
    return min(MOST_LEAST, math.ceil(ROUND_S / step_s))


def round_length(cell: Cell, measured: int, step_s: list[float | None]) -> int:
    """The calls that set the rounds' length: the suspect's measured calls, for a
    budgeted cell no more than its budget holds at the slower step time."""
    budget = cell.settings.run_budget
    slowest = max((s for s in step_s if s), default=0.0)
    if budget is None or slowest <= 0:
        return measured
    return min(measured, int(budget / slowest))


def against_baseline(cfg: AnalysisConfig, res: CellResult, within: CellVerdict,
                     base_series: Series, series: Series, label: str, rounds: int,
                     runs: Runs | None = None) -> CellResult | RoundsPlan:
    """`res` against a baseline's samples: the pooled comparison's verdict, or, where it
    leaves a doubt (`rounds_for`), the rounds that must settle it."""
    # lazy: NumPy, with the baseline's statistics, once a first comparison is asked
    from harness.analysis import baseline, decision

    facts = baseline.baseline_facts(cfg, base_series, series, label, rounds,
                                    good=res.verdict in GOOD)
    if facts.steps is not None and decision.rounds_for(res.verdict, facts, cfg):
        return RoundsPlan(res, within, facts, label, runs,
                          MAX_CALLS if res.verdict in GOOD else None,
                          # Both sides make the same calls: the more of their two
                          # least calls. A cost that varies with the call (lexers loaded
                          # on first use, a cache warming, inputs that cycle) read over
                          # runs of different lengths is a change that is not there:
                          # beside two busy loops an A/A pygments pair ran 1,494-1,727
                          # calls a baseline run, 1,000 a suspect run, and read
                          # `regression` 3 times in 3 (rounds 1.11-1.53x).
                          within_reach(max(least_calls(base_series.cols.own_step),
                                           least_calls(res.summary.median_step_s)),
                                       within, base_series, series))
    return with_comparison(cfg, res, within, facts)


def within_reach(least: int, within: CellVerdict, base: Series, suspect: Series) -> int:
    """`least` calls, or fewer where a side's round run would take more than `ROUND_MOST`
    times the longer measured run (`ROUND_S` at least) to make them: the suspect's
    seconds with the rise of its steps carried on (`rules.reach_s`), the baseline's at
    its own step. Met where the steps differ more than tenfold, or a step's cost grows
    with the call (a slowdown within the run): a leak that kept a logging handler per
    call, measured 3,000 calls in 0.4 s, ran rounds of 17,740 calls (0.1 s of the
    baseline's step), 11 s each."""
    ran, took = len(suspect.cols.steps), float(suspect.cols.steps.sum())
    if least <= 0 or ran <= 0 or took <= 0:
        return least
    step = base.cols.own_step or 0.0
    limit = ROUND_MOST * max(ROUND_S, took, float(base.cols.steps.sum()))
    # the rise carried on only where the run read a slowdown: a flat step's late-to-early
    # noise, carried over 80 times its calls, would cut a cheap step's rounds short
    trend = within.steps if within.steps is not None and within.steps.slowdown else None

    def cost(calls: int) -> float:
        return max(reach_s(trend, ran, took, calls), calls * step)

    if cost(least) <= limit:
        return least
    lo, hi = 1, least       # the most calls within the limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if cost(mid) <= limit else (lo, mid - 1)
    return lo


def against_row(cfg: AnalysisConfig, cell: Cell, measured: Measured, base: Cell | Series,
                base_result: CellResult, base_series: Series, label: str
                ) -> CellResult | RoundsPlan:
    """A measured cell against its baseline's run, its rounds beside `base`."""
    res = measured.result
    calls = round_length(cell, len(measured.series.cols.steps),
                         [r.summary.median_step_s for r in (res, base_result)])
    runs = Runs(cell, base, calls, measured.home, measured.info)
    return against_baseline(cfg, res, measured.verdict, base_series, measured.series,
                            label, cell.settings.rounds, runs)


MIN_CALLS = 50
BACKOFF_S, MAX_BACKOFF_S = 1.0, 8.0


def round_cell(cell: Cell, measured: int, cap: int | None = MAX_CALLS,
               as_user: bool = False, least: int = 0) -> Cell:
    """The cell as a confirmation run: a fixed, shorter length (half `measured`, within
    `MIN_CALLS`..`cap`, at least `least`, at most `--iterations`), no early stop or
    repeats. `as_user`: under the user's allocator and without heap readings, which
    change what a step that allocates costs (a round reads time alone)."""
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
    stat, busy = _read(series)
    if ended.error or ended.timed_out or ended.exit_code not in (0, None) or not stat:
        why = ended.error or ("timed out" if ended.timed_out else
                              f"exit {ended.exit_code}" if ended.exit_code not in (0, None)
                              else "no step times")
        return None, None, f"{role} run failed: {why}"
    return stat, busy, None


def _saved(series: Series) -> RunRead:
    """A saved run read as every round's baseline run."""
    stat, busy = _read(series)
    return stat, busy, None if stat else "the saved run has no step times"


def _read(series: Series) -> tuple[RunStat | None, float | None]:
    """A run's step time statistic and how busy its host was (`analysis.stepreading`)."""
    # lazy: NumPy, with the step times' reading, once a first comparison is asked
    from harness.analysis import stepreading

    return stepreading.run_stat(series), stepreading.busy_share(series)


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
    """Run the rounds `plan` asks for until settled (baseline, then suspect); what they
    found."""
    # lazy: NumPy, with the rounds' statistics, once a first comparison is asked
    from harness.analysis import baseline, decision, stepreading

    runs, pooled, label, cap = plan.runs, plan.pooled, plan.label, plan.cap
    assert runs is not None, "a plan whose rounds cannot run is recalled, not run"
    cfg, steps, rounds = ctx.cfg, pooled.steps, pooled.rounds
    assert steps is not None, "rounds confirm a pooled step-time comparison"
    cell, base, suspected = runs.suspect, runs.base, steps.direction
    # A saved run's rounds run as it ran: its statistic was read under its settings.
    as_user = isinstance(base, Cell)
    short = round_cell(cell, runs.calls, cap, as_user, plan.least)
    if isinstance(base, Cell):
        if suspected == "~" and not ctx.busy_said.is_set():
            ctx.busy_said.set()
            ctx.progress(f"host busy: {pooled.busy:.0%} run-queue delay in {cell.id} or "
                         "its baseline; unchanged-looking cells are confirmed in "
                         "interleaved rounds")
        short_base = round_cell(base, runs.calls, cap, as_user, plan.least)
        how = "interleaved rounds"

        def base_run(k: int) -> RunRead:
            return _run(ctx, short_base, ctx.images.get(short_base),
                        runs.home / "rounds" / f"{k}-baseline", "baseline")
    else:
        saved = _saved(base)
        how = "rounds of this run against the saved one"

        def base_run(k: int) -> RunRead:
            return saved
    what = f"suspected {suspected}" if suspected != "~" else "host busy"
    ctx.progress(f"{cell.id} vs {label}: {decision.pooled_text(steps, label)}, {what}; "
                 "confirming in "
                 f"{how} (2 to {2 * rounds}, until settled)")
    done: list[Round] = []
    k = 0
    started = time.monotonic()
    most = 2 * rounds
    least = min(CONFIRM_ROUNDS, most)   # `rounds: 1` runs two: those two confirm
    while k < most:
        if baseline.settled(baseline.decide_rounds(done, suspected, cfg, least), cfg):
            break   # decided either way, or the rounds disagree: more cannot change it
        if usable(done) + (most - k) < 2:
            break   # the rounds left cannot give the two usable ones a decision needs
        k += 1
        b_med, b_busy, b_fail = base_run(k)
        o_med, o_busy, o_fail = _run(ctx, short, runs.info,
                                     runs.home / "rounds" / f"{k}-suspect", "suspect")
        j = baseline.judged(b_med, o_med, b_busy, o_busy, cfg, failed=b_fail or o_fail or "")
        why = j.left_out
        r = Round(k, j.base_s, j.other_s, b_busy, o_busy, why, j.speed,
                  *stepreading.sm_clocks(b_med, o_med), cpu_ratio=j.cpu, rule=j.rule)
        done.append(r)
        ctx.progress(round_said(cell.id, label, r, why, j.note))
        more = k < most and usable(done) + (most - k) >= 2
        if why and why.startswith("host busy") and more:
            # Let a load burst pass, longer after each busy round.
            ctx.cancel.wait(min(BACKOFF_S * 2 ** (k - 1), MAX_BACKOFF_S))
        if ctx.cancel.is_set():
            break
    return with_cost(baseline.decide_rounds(done, suspected, cfg, least), done, started,
                     f"({2 * len(done)} runs)" if isinstance(base, Cell)
                     else "of this run against the saved one")


def with_comparison(cfg: AnalysisConfig, res: CellResult, within: CellVerdict,
            facts: Baseline | None) -> CellResult:
    """`res` with the table's verdict over `within` and `facts` (None: no comparison)."""
    return with_verdict(res, verdict(cfg, baseline=facts, within=within))


def with_rounds(cfg: AnalysisConfig, plan: RoundsPlan, found: Confirmation | None
                ) -> CellResult:
    """The planned comparison decided with what its rounds found (None: none)."""
    return with_comparison(cfg, plan.res, plan.within,
                   dataclasses.replace(plan.pooled, confirmation=found))


def with_verdict(res: CellResult, verdict: CellVerdict) -> CellResult:
    """`res` with every field it shares with `verdict` taken from it."""
    mine = {f.name for f in dataclasses.fields(CellResult)}
    given = {f.name: getattr(verdict, f.name) for f in dataclasses.fields(verdict)
             if f.name in mine}
    for name, value in given.items():
        if isinstance(value, list):
            given[name] = tuple(value)
        elif isinstance(value, dict):
            given[name] = dict(value)
    return dataclasses.replace(res, **given)
