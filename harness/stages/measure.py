"""A cell's within-run measurement as `STAGES` over one `CellRun`; an ambiguous cell
runs again, longer, as the re-run rules say (`analysis.rules`)."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.analysis.kinds import RUN_LONGER
from harness.analysis.rules import (
    BUSY_HOST,
    CALLS,
    LONGER,
    SAME,
    SHORT,
    STANDS,
    TIMEOUT_BUSY,
    RerunEvidence,
    fill_calls,
    reach_s,
    rerun_rule,
    runs_again,
    would_tell,
)
from harness.errors import EngineUnavailable, EnvironmentUnavailable
from harness.matrixfile.model import BUDGET_CAP, BUDGET_MIN_CALLS, Cell, RunSettings
from harness.preflight import decidable_iterations
from harness.result.build import cell_result, timings_of
from harness.result.model import Attempt, Timings, Unavailable
from harness.runtimes.base import ImageInfo, RunOutcome
from harness.stages.context import CellRun, Context, Measured, Ran, verdict

if TYPE_CHECKING:
    from harness.analysis.decision import CellVerdict
    from harness.analysis.records import LiveDecision
    from harness.protocol.series import Series

UNSUPPORTED_DEADLINE_S = 300.0


def prepare_image(ctx: Context, run: CellRun) -> None:
    """The cell's image; one that cannot be had settles the cell as `unavailable`."""
    run.outdir = ctx.store.cell_dir(run.cell.id, fresh=True)   # emptied for a (new) run
    try:
        run.info = ctx.images.get(run.cell)
    except EnvironmentUnavailable as exc:
        text = str(exc).strip()
        reason = text.splitlines()[0] if text else type(exc).__name__
        what = "engine" if isinstance(exc, EngineUnavailable) else "image"
        run.wait_s = time.monotonic() - run.started
        run.info, run.ended = ImageInfo(ref=run.cell.image.ref), RunOutcome(None, error=text)
        run.unavailable = Unavailable(what, text)
        run.verdict = verdict(ctx.cfg, unavailable=reason)
        return
    run.wait_s = time.monotonic() - run.started
    run.t0 = time.monotonic()


def gpu_precheck(ctx: Context, run: CellRun) -> None:
    """not-applicable settles the cell without a run; unsupported runs it briefly."""
    assert run.info is not None
    pre = ctx.gpus.precheck(run.cell, run.info)
    if pre is not None and pre[0] == "not-applicable":
        run.verdict = verdict(ctx.cfg, precheck=pre)
    elif pre is not None and pre[0] == "unsupported":
        s = run.cell.settings
        short = dataclasses.replace(s, timeout=min(s.timeout, UNSUPPORTED_DEADLINE_S))
        run.run_cell = run.cell.with_settings(short)
        pre = (pre[0], f"{pre[1]} (deadline {short.timeout:.0f}s)")
        ctx.progress(f"{run.cell.id}: {pre[1]}")
    run.precheck = pre


def run_attempts(ctx: Context, run: CellRun) -> None:
    """Run attempts, each deciding the within-run verdict. An engine that went away is
    retried once; growth that stays ambiguous runs again, longer (up to `repeats`)."""
    assert run.info is not None and run.outdir is not None
    retried = False
    spent = 0.0     # what its attempts took, against its `overrun` bound
    seen = False    # an attempt read a slowdown: one read again stands (rule `one-run`)
    while True:
        cell = run.running
        ran = ctx.runner.run(cell, run.info, run.outdir)
        run.ended, run.run_s, run.runtime = ran.ended, ran.run_s, ran.runtime
        # In the cell's own time (the agent's cell_s), so a busy host stretches the bound.
        spent += _own_s(ran.run_s, ran.series)
        if ran.ended.error and not retried:
            retried = True
            run.engine_retries += 1
            run.attempts.append(Attempt("crash", ran.ended.error, cell.settings.iterations))
            ctx.progress(f"{run.cell.id}: {ran.ended.error}; retrying once")
            continue
        t_an = time.monotonic()
        run.series = ran.series
        decision = ran.watched.decision if ran.watched is not None else None
        room = _room(run, spent)

        def decided(again: bool, first: bool, ran: Ran = ran,
                    decision: LiveDecision | None = decision, seen: bool = seen,
                    room: int | None = room) -> CellVerdict:
            return verdict(ctx.cfg, series=ran.series, outcome=ran.ended,
                           wants_gpu=run.cell.gpu.wants_gpu, live=decision,
                           precheck=run.precheck, again=again, first=first,
                           replicated=seen, budget=run.cell.settings.run_budget, room=room)

        run.verdict = decided(may_run_again(run), run.repeats_used == 0)
        facts = run.verdict.facts
        seen = seen or (facts is not None and bool(facts.slowdown) and not facts.busy)
        run.analyse_s = time.monotonic() - t_an
        run.attempts.append(Attempt(run.verdict.verdict, run.verdict.reason,
                                    cell.settings.agent_iterations,
                                    seconds=round(ran.run_s, 3)))
        if not _longer(ctx, run, spent, lambda: decided(False, False)):
            return


def _room(run: CellRun, spent: float) -> int | None:
    """The calls a run again may make within the `overrun` bound; None: no bound."""
    left = _bound(run) - spent
    if math.isinf(left) or run.cell.settings.run_budget is None or run.series is None:
        return None
    ran = run.series.measured
    own, measured = _until_calls_price(run)
    if ran <= 0 or measured <= 0:
        return 0
    return max(0, int(ran * (1 + (left - own) / measured)))


def _until_calls_price(run: CellRun) -> tuple[float, float]:
    """(own seconds, measured-phase seconds) of this run: a run again until N calls costs
    `own + measured * (N / calls measured - 1)`."""
    return _own_s(run.run_s, run.series), _measured_s(run)


def _own_s(run_s: float, series: Series | None) -> float:
    """A run's seconds in the cell's own time: its wall seconds less what the host took
    (`_given_back`), and no more than the agent's own life (`own_s`: where the host's
    wait to spawn, read and reap it stretched a 0.5 s budget's run 0.04 s quiet to 2 s
    beside fourteen busy loops, counted against its bound)."""
    own = max(0.0, run_s - _given_back(series, whole=True))
    said = ((series.end or {}) if series is not None else {}).get("own_s")
    return min(own, float(said)) if isinstance(said, int | float) and said > 0 else own


def may_run_again(run: CellRun) -> bool:
    """Whether the cell may run again: repeats left, no `--iterations` (`length-last`)."""
    s = run.cell.settings
    return run.repeats_used < s.repeats and s.asked_calls is None


@dataclass(frozen=True)
class _Next:
    """A next attempt: its settings, what it runs, its seconds at this pace (wall clock,
    for the timeout), its words, and its seconds in the cell's own time (for the
    `overrun` bound, which counts that; None: `seconds`)."""

    settings: RunSettings
    what: str
    seconds: float
    said: str
    own_s: float | None = None

    @property
    def own(self) -> float:
        return self.seconds if self.own_s is None else self.own_s


def _bound(run: CellRun) -> float:
    """The cell's `overrun` bound in seconds (budget x `overrun`); inf without one."""
    s = run.cell.settings
    budget = s.run_budget
    return s.overrun * budget if s.overrun is not None and budget is not None else math.inf


def _longer(ctx: Context, run: CellRun, spent: float, last: Callable[[], CellVerdict]) -> bool:
    """Whether an ambiguous cell runs one more attempt, by the re-run rules (the rule's id
    kept on the attempt); False: it stands. `last`: its verdict as a final attempt's."""
    verdict, s = run.verdict, run.running.settings
    assert verdict is not None
    facts = verdict.facts
    plans: dict[str, _Next] = {}
    left = _bound(run) - spent

    def plan(kind: str) -> _Next:
        if kind not in plans:
            plans[kind] = _within(run, _next(ctx, run, kind), left)
        return plans[kind]

    ev = RerunEvidence(
        undecided=verdict.verdict in RUN_LONGER,
        spent=run.repeats_used > run.cell.settings.repeats,
        asked=run.cell.settings.asked_calls is not None, busy=verdict.rule == BUSY_HOST,
        crowded=verdict.rule == TIMEOUT_BUSY,
        script=run.series is not None and (run.series.end or {}).get("mode") == "script",
        budgeted=s.run_budget is not None, short=facts is not None and bool(facts.short),
        capped=facts is not None and bool(facts.budget_calls) and not facts.short,
        seconds=lambda kind: plan(kind).seconds, own=lambda kind: plan(kind).own,
        timeout=s.timeout, left=left)
    rule, named = rerun_rule(ev)
    run.attempts[-1] = dataclasses.replace(run.attempts[-1], rerun=rule.id)
    cid = run.cell.id
    if rule.id == "rerun-overrun":
        # What it read stands, with why; a leak cut short (rule `short`) stays undecided
        final = verdict if verdict.rule == SHORT else last()
        if final.rule == SHORT and facts is not None:     # it is not run again: say so
            final = dataclasses.replace(final, reason=final.reason.replace(
                runs_again(facts.budget_calls), would_tell(facts.budget_calls)))
        said = too_short(ctx, run, spent) if final.verdict in RUN_LONGER else unrun(run)
        run.verdict = dataclasses.replace(final, reason=f"{final.reason}; {said}")
        run.attempts[-1] = dataclasses.replace(run.attempts[-1], verdict=final.verdict,
                                               reason=run.verdict.reason)
        ctx.progress(f"{cid}: {final.verdict} ({final.reason}); {said}")
    if rule.id == "rerun-asked":
        ctx.progress(f"{cid}: ambiguous ({verdict.reason}); not run again: --iterations "
                     f"{run.cell.settings.asked_calls} bounds every run of it; raise it, or "
                     "leave it out, to let it decide")
    if rule.id == "rerun-crowded-past":
        said = (f"not run again: {plan(SAME).what} would take about "
                + (f"{plan(SAME).seconds:.0f} s at this run's pace" if math.isfinite(
                    plan(SAME).seconds) else "as long: it measured no call")
                + f", past its timeout ({s.timeout:.0f} s); raise `timeout:`, or run it on "
                "a quieter host")
        run.verdict = dataclasses.replace(verdict, reason=f"{verdict.reason}; {said}")
        run.attempts[-1] = dataclasses.replace(run.attempts[-1], reason=run.verdict.reason)
        ctx.progress(f"{cid}: ambiguous ({verdict.reason}); {said}")
    if rule.id == "rerun-timeout":
        ctx.progress(f"{cid}: ambiguous ({verdict.reason}); not run again: "
                     f"{plan(named).what} would take about {plan(named).seconds:.0f} s, "
                     f"past the cell's timeout ({s.timeout:.0f} s); raise timeout: to let "
                     "it decide")
    if rule.says == STANDS:
        return False
    nxt = plan(named)
    run.run_cell = run.running.with_settings(nxt.settings)   # the next attempt's
    ctx.progress(f"{cid}: ambiguous ({verdict.reason}); running again {nxt.said} "
                 f"({run.repeats_used}/{run.cell.settings.repeats})")
    return True


def _next(ctx: Context, run: CellRun, kind: str) -> _Next:
    """The next attempt of a kind (`rules`: CALLS, BUDGET, LONGER, SAME, or "cap"):
    undecided growth needs a longer look, not the same one; "cap" raises only the cap,
    CALLS keeps the budget and runs until the calls that tell a leak from a cache."""
    verdict, s = run.verdict, run.running.settings
    assert verdict is not None
    facts = verdict.facts
    asks = verdict.rerun or 0
    least = decidable_iterations(s, ctx.cfg)
    if kind == SAME:
        return _same(run, s)
    if kind == LONGER:
        calls = max(asks or s.agent_iterations * 2, least)
        longer = (dataclasses.replace(s, iterations=calls) if s.max_iterations is None
                  else dataclasses.replace(s, max_iterations=calls))
        return _Next(longer, f"{calls} iterations",
                     run.run_s * calls / max(1, s.agent_iterations),
                     f"with {calls} iterations")
    budget = s.run_budget
    assert budget is not None and s.max_iterations is not None and facts is not None
    ran = max(1, (run.series.measured if run.series is not None else 0) or s.agent_iterations)
    if kind == "cap":
        cap = max(min(BUDGET_CAP, max(asks, facts.budget_calls)), s.max_iterations * 2, least)
        return _Next(dataclasses.replace(s, max_iterations=cap), f"up to {cap:,} calls",
                     run.run_s, f"for up to {cap:,} calls in {budget:.3g} s")
    if kind == CALLS:
        calls = max(facts.budget_calls, asks)
        own, measured = _until_calls_price(run)
        return _Next(dataclasses.replace(s, budget_calls=calls,
                                         max_iterations=max(s.max_iterations, calls)),
                     f"{calls:,} calls", own + measured * (calls / ran - 1),
                     f"until {calls:,} calls")
    factor = max(2.0, asks / ran)
    longer_s = budget * factor
    cap = max(int(s.max_iterations * factor), least, asks)
    # The calls it asks are made whatever their pace (--budget-min): slowing steps or a
    # busy host would make fewer in the longer budget and leave the question open
    at_least = max(s.budget_calls or 0, asks,
                   fill_calls(ctx.cfg, verdict.rule, ran, cap)) or None
    measured = _measured_s(run)
    steps_s = max(longer_s, reach_s(verdict.steps, ran, measured, at_least or 0))
    # Past its steps, the run's start and end: on the wall clock for the timeout, in its
    # own time for the bound (a busy host's share of the first run is not the cell's: it
    # once read a 2.1 s run of 1,200 calls as past 7.3 s of bound left). The bound is
    # held by the run's own end (`budget_max`), so it is asked at the pace the run made,
    # no rise carried on: a fill's 2,000 calls, at a 1.3x rise the verdict did not read,
    # once priced past 6.4 s left where at its pace they took 3.7 s (CI103).
    own, _ = _until_calls_price(run)
    paced_s = max(longer_s, reach_s(None, ran, measured, at_least or 0))
    return _Next(dataclasses.replace(s, budget=longer_s, max_iterations=cap,
                                     budget_calls=at_least),
                 f"a budget of {longer_s:.0f} s", steps_s + max(0.0, run.run_s - measured),
                 f"for {longer_s:.3g} s" + (f", {at_least:,} calls at least" if at_least else ""),
                 own_s=paced_s + max(0.0, own - measured))


def _same(run: CellRun, s: RunSettings) -> _Next:
    """The same run again, and its seconds at this pace; inf where it measured no call."""
    made = _calls(run)
    phases = (run.series.end or {}).get("phases") or {} if run.series is not None else {}
    wall = float(phases.get("measure") or run.run_s)
    own = _measured_s(run)
    if s.run_budget is not None:
        calls = int(s.run_budget / (own / made)) if made and own > 0 else 0
        what = f"its {s.run_budget:g} s budget again" + (f", about {calls:,} calls"
                                                          if calls else "")
    else:
        calls = s.agent_iterations
        what = f"the same {calls:,} calls"
    seconds = (max(0.0, run.run_s - wall) + calls * wall / made) if made and wall > 0 \
        else math.inf
    return _Next(s, what, seconds, f"with {what} (the host was busy)")


def _within(run: CellRun, nxt: _Next, left: float) -> _Next:
    """A budgeted next attempt stopped at what the `overrun` bound leaves (`budget_max`)."""
    s = nxt.settings
    if math.isinf(left) or s.run_budget is None:
        return nxt
    own, measured = _until_calls_price(run)
    most = max(s.run_budget, left - max(0.0, own - measured))
    return dataclasses.replace(nxt, settings=dataclasses.replace(s, budget_max=most))


def _measured_s(run: CellRun) -> float:
    """The measured phase's seconds in the cell's own time (the agent's cell_s)."""
    end = (run.series.end or {}) if run.series is not None else {}
    phases = end.get("phases") or {}
    measured = float(phases.get("measure") or run.run_s)
    return measured - _given_back(run.series)


def _given_back(series: Series | None, whole: bool = False) -> float:
    """The measured phase's seconds not the cell's (wall less cell_s); with `whole`, the
    run's: also what the host took of its start, setup and end (the agent's queued_out_s).
    0 for what the agent did not say."""
    end = (series.end or {}) if series is not None else {}
    cell, measure = end.get("cell_s"), (end.get("phases") or {}).get("measure")
    out = end.get("queued_out_s") if whole else None
    back = max(0.0, float(out)) if isinstance(out, int | float) else 0.0
    if not isinstance(cell, int | float) or not isinstance(measure, int | float):
        return back
    return back + max(0.0, float(measure) - float(cell))


def too_short(ctx: Context, run: CellRun, spent: float) -> str:
    """Why an ambiguous cell is not run again past `overrun`, and the budget that would do."""
    verdict, s = run.verdict, run.running.settings
    assert verdict is not None
    calls = _calls(run)
    pace = _measured_s(run) / max(1, calls)
    need = max(verdict.rerun or 0, s.budget_calls or BUDGET_MIN_CALLS,
               decidable_iterations(s, ctx.cfg))
    advice = budget_advice(need, pace, run.cell.settings.run_budget,
                           busy=verdict.rule == BUSY_HOST)
    return (f"its budget was too short for a verdict: {calls:,} calls of {_secs(pace)} in "
            f"{spent:.1f} s in all, and a run again {_passes_bound(run)}; {advice}")


def budget_advice(need: int, pace: float, budget: float | None, busy: bool) -> str:
    """The budget that would decide, in words: the calls needed at this pace, above the
    budget set; none for a busy host (rule `busy-host`), which a longer run won't cure."""
    if busy:
        return ("a longer budget is no cure: the host was too busy to time its calls "
                "(run it again on a quieter machine)")
    wants = _round_up(need * pace)
    if budget is not None and wants <= budget:
        wants = _round_up(2 * budget)
    return f"set budget >= {wants:g}s ({need:,} calls at this pace)"


# How a reason says why it was not run again (`unrun`); the plugin leaves it out.
AS_READ = "as read: a run again"


def unrun(run: CellRun) -> str:
    """Why a verdict decided under its `overrun` bound was not looked at again."""
    return f"{AS_READ} {_passes_bound(run)}"


def _calls(run: CellRun) -> int:
    """The calls its last attempt measured."""
    return (run.series.measured if run.series is not None else 0) or 0


def _passes_bound(run: CellRun) -> str:
    asked = run.cell.settings
    assert asked.overrun is not None
    return (f"would pass its bound ({asked.overrun:g}x its {asked.run_budget:g} s budget, "
            "`overrun`)")


def _secs(seconds: float) -> str:
    return f"{seconds * 1000:.3g} ms" if seconds < 0.1 else f"{seconds:.2g} s"


def _round_up(seconds: float) -> float:
    """Seconds rounded up: whole seconds from 10 s, tenths below (0.5 s at least)."""
    scale = 1.0 if seconds >= 10 else 0.1
    return max(0.5, round(math.ceil(seconds / scale - 1e-9) * scale, 1))


STAGES: tuple[Callable[[Context, CellRun], None], ...] = (
    prepare_image, gpu_precheck, run_attempts)


def measure(ctx: Context, cell: Cell) -> Measured:
    """Run the cell through `STAGES`; its within-run result (written once compared)."""
    run = CellRun(cell)
    for stage in STAGES:
        stage(ctx, run)
        if run.verdict is not None:   # settled before any run (no image, no GPU)
            break
    return result(ctx, run)


def result(ctx: Context, run: CellRun) -> Measured:
    """The cell's within-run result, from everything its stages left."""
    assert run.verdict is not None and run.info is not None
    now = time.monotonic()
    if run.unavailable is not None:
        timings = Timings(cell_s=run.wait_s, prepare_s=run.wait_s)
    elif not run.attempts:
        timings = Timings(cell_s=now - run.t0, prepare_s=run.info.prepare_s)
    else:
        timings = timings_of(run.info, run.series, run.run_s, run.analyse_s, run.wait_s,
                             now - run.t0)
    runtime = run.runtime or ctx.runtime_for(run.cell).name   # settled before a run
    res = cell_result(run.cell, run.verdict, run.series, run.ended, info=run.info,
                      runtime=runtime, script=_rel(ctx, run.cell.scenario.script),
                      gpus=ctx.gpus.seen.get(run.cell.host.label), attempts=run.attempts,
                      timings=timings, unavailable=run.unavailable)
    assert run.outdir is not None
    return Measured(res, run.verdict, run.series, run.outdir, run.info)


def _rel(ctx: Context, path: Path) -> str:
    try:
        return str(path.relative_to(ctx.matrix.file.resolve().parent))
    except ValueError:
        return str(path)
