"""Stage 3, run attempts: each attempt runs the agent (`execute.execute`: the runtime, the
live watcher in early-stop mode, the samples read once), then decides the within-run
verdict. An engine that went away is retried once; growth that stays ambiguous runs
again, longer (up to the cell's `repeats`)."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from harness import analysis
from harness.analysis.kinds import RUN_LONGER
from harness.analysis.runrules import CALLS, LONGER, STANDS, RerunEvidence, rerun_rule
from harness.matrixfile.model import BUDGET_CAP, RunSettings
from harness.preflight import decidable_iterations
from harness.result.model import Attempt
from harness.stages.context import CellRun, Context
from harness.stages.execute import execute


def run_attempts(ctx: Context, run: CellRun) -> None:
    """Run the cell until its within-run verdict is decided or its repeats are spent."""
    assert run.info is not None
    retried = False
    while True:
        cell = run.running
        ran = execute(ctx, cell, run.info, ctx.store.cell_dir(run.cell.id, fresh=True))
        run.ended, run.run_s = ran.ended, ran.run_s
        if ran.ended.error and not retried:
            # The engine went away (restart, lost connection): once more, then record.
            retried = True
            run.engine_retries += 1
            run.attempts.append(Attempt("crash", ran.ended.error, cell.settings.iterations))
            ctx.progress(f"{run.cell.id}: {ran.ended.error}; retrying once")
            continue
        t_an = time.monotonic()
        run.series = ran.series
        decision = ran.watched.decision if ran.watched is not None else None
        run.verdict = analysis.decide(analysis.CellFacts(
            ctx.cfg, ran.series, ran.ended, run.cell.gpu.wants_gpu, decision, run.precheck,
            again=may_run_again(run), first=run.repeats_used == 0))
        run.analyse_s = time.monotonic() - t_an
        run.attempts.append(Attempt(run.verdict.verdict, run.verdict.reason,
                                    cell.settings.agent_iterations))
        if not _longer(ctx, run):
            return


def may_run_again(run: CellRun) -> bool:
    """Whether the cell may run again, longer: its repeats are not spent, and no
    `--iterations` bounds its runs (every re-run is longer than the run before it, so
    with one what the run read stands: rule `length-last`)."""
    s = run.cell.settings
    return run.repeats_used < s.repeats and s.asked_calls is None


@dataclass(frozen=True)
class _Next:
    """A next attempt: its settings, what it runs ("2,000 calls"), the seconds it would
    take at this run's pace, and how progress says it."""

    settings: RunSettings
    what: str
    seconds: float
    said: str


def _longer(ctx: Context, run: CellRun) -> bool:
    """Whether an ambiguous cell runs one more attempt, and how: the re-run rules
    (`runrules.RERUN_RULES`) over what its last attempt showed; the rule's id is kept
    on that attempt. False: it stands as it is."""
    verdict, s = run.verdict, run.running.settings
    assert verdict is not None
    facts = verdict.facts
    plans: dict[str, _Next] = {}

    def plan(kind: str) -> _Next:
        if kind not in plans:
            plans[kind] = _next(ctx, run, kind)
        return plans[kind]

    ev = RerunEvidence(
        undecided=verdict.verdict in RUN_LONGER,
        spent=run.repeats_used > run.cell.settings.repeats,
        script=run.series is not None and (run.series.end or {}).get("mode") == "script",
        asked=run.cell.settings.asked_calls is not None,
        budgeted=s.run_budget is not None, short=facts is not None and bool(facts.short),
        capped=facts is not None and bool(facts.budget_calls) and not facts.short,
        seconds=lambda kind: plan(kind).seconds, timeout=s.timeout)
    rule, named = rerun_rule(ev)
    run.attempts[-1] = dataclasses.replace(run.attempts[-1], rerun=rule.id)
    cid = run.cell.id
    if rule.id == "rerun-timeout":
        ctx.progress(f"{cid}: ambiguous ({verdict.reason}); not run again: "
                     f"{plan(named).what} would take about {plan(named).seconds:.0f} s, "
                     f"past the cell's timeout ({s.timeout:.0f} s); raise timeout: to let "
                     "it decide")
    if rule.id == "rerun-asked":
        ctx.progress(f"{cid}: ambiguous ({verdict.reason}); not run again: --iterations "
                     f"{run.cell.settings.asked_calls} bounds every run of it; raise it, or "
                     "leave it out, to let it decide")
    if rule.says == STANDS:
        return False
    nxt = plan(named)
    _run_as(run, nxt.settings)
    ctx.progress(f"{cid}: ambiguous ({verdict.reason}); running again {nxt.said} "
                 f"({run.repeats_used}/{run.cell.settings.repeats})")
    return True


def _next(ctx: Context, run: CellRun, kind: str) -> _Next:
    """The next attempt of a kind (`runrules`: CALLS, BUDGET, LONGER, or "cap").

    Undecided growth needs a longer look, not the same look again: twice as long (or
    the length the verdict asks for: growth a filling cache could still explain runs
    4x longer, `analysis.growth.fill_check`), and at least long enough to decide from
    step samples alone. A budgeted cell's budget grows by the same factor, its cap
    alike; one its cap ended keeps its budget with its cap raised to what the budget
    holds at this pace; one its budget ended after too few calls to tell a leak from a
    cache (`analysis.decision.cut_short`) keeps its budget and runs until the calls."""
    verdict, s = run.verdict, run.running.settings
    assert verdict is not None
    facts = verdict.facts
    asks = verdict.rerun or 0
    least = decidable_iterations(s, ctx.cfg)
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
        phases = (run.series.end or {}).get("phases") or {} if run.series is not None else {}
        measured = float(phases.get("measure") or run.run_s)
        return _Next(dataclasses.replace(s, budget_calls=calls,
                                         max_iterations=max(s.max_iterations, calls)),
                     f"{calls:,} calls", run.run_s + measured * (calls / ran - 1),
                     f"until {calls:,} calls")
    factor = max(2.0, asks / ran)
    longer_s = budget * factor
    cap = max(int(s.max_iterations * factor), least)
    return _Next(dataclasses.replace(s, budget=longer_s, max_iterations=cap),
                 f"a budget of {longer_s:.0f} s", longer_s + (run.run_s - budget),
                 f"for {longer_s:.3g} s")


def _run_as(run: CellRun, settings: RunSettings) -> None:
    """The cell's next attempt runs with `settings`."""
    run.run_cell = dataclasses.replace(run.running, scenario=dataclasses.replace(
        run.running.scenario, settings=settings))
