"""`harness report DIR --why CELL`: the rules in order, each with whether it fired on one
recorded cell's stored evidence, with their figures (`analysis.rules.why`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from harness.analysis.decision import CellFacts, decide
from harness.analysis.facts import Facts
from harness.analysis.rules import (
    Evidence,
    PeakVerdictEvidence,
    SettledEvidence,
    UnsettledEvidence,
    first_of,
    first_rule,
    rule_named,
    table,
)
from harness.analysis.rules import said as rule_says
from harness.analysis.rules import why as rules_why
from harness.analysis.stepreading import load_rule
from harness.errors import InputError
from harness.matrixfile.load import analysis_of
from harness.report import Report
from harness.result.build import run_outcome
from harness.store import SeriesCache
from harness.store.gate import Gated

if TYPE_CHECKING:
    from harness.result.model import CellResult
    from harness.thresholds import AnalysisConfig


def named(pool: list[str], cell: str) -> list[str]:
    """The ids of `pool` that are `cell`, else those that end in it."""
    return [c for c in pool if c == cell] or [c for c in pool if c.endswith(cell)]


def why(cell: str, root: Path, recorded: Report, gated: Gated) -> list[str]:
    """Why `cell` got its verdict, in lines: rules on its evidence, run's course, step times.

    Raises: InputError: no current cell of that id or suffix (a stale one: its rerun), no samples.
    """
    ids = sorted(recorded.results)
    found = named(ids, cell)
    stale = named(sorted(gated.stale), cell)
    if not found and len(stale) == 1:
        raise InputError(f"--why {cell}: {stale[0]} is stale ({gated.stale[stale[0]]}),"
                         " so its verdict is not the matrix's now\nfix: "
                         f"{gated.refresh} runs it again, then harness report {root} "
                         f"--why {cell}")
    if len(found) != 1:
        raise InputError(f"--why {cell}: {'no' if not found else 'more than one'} cell "
                         f"of {root} is called so\nfix: "
                         + (f"one of {', '.join(ids[:8])}" if ids else
                            f"harness report {root} names its cells and their state"))
    res = recorded.results[found[0]]
    cfg = analysis_of(root / "matrix.yaml", [])
    how = "as recorded"
    if res.facts is not None:
        ev = Evidence(res.memory, res.facts)
    else:
        # Recorded before the rules' facts were kept: read again from its samples.
        series = SeriesCache(root)(res.id)
        if series is None or not series.samples:
            raise InputError(f"--why {res.id}: recorded before its rules' evidence was kept, "
                             "and its samples.jsonl is missing or empty, so no rule can be "
                             f"read again\nfix: harness report {root} shows its "
                             "recorded verdict")
        again = decide(CellFacts(cfg, series, run_outcome(res),
                                 res.gpu.value not in ("", "none")))
        ev = Evidence(again.memory, again.facts or Facts())
        how = "read again from its samples (recorded before its evidence was kept)"
    rule = rule_named(res.rule)
    lines = [f"{res.id}: {res.verdict} ({res.reason})",
             f"decided by rule: {rule.id if rule else res.rule or '(not recorded)'}",
             f"the rules, in order, on its evidence {how}:",
             *rules_why(ev, cfg), *course_said(res), *steps_said(res, cfg)]
    fired, _ = first_rule(ev)
    if rule is not None and fired.id != rule.id:
        lines.append(f"note: on this evidence rule {fired.id} fires first, not {rule.id}: "
                     "the thresholds changed since it ran (harness sweep --reanalyze "
                     "decides again)")
    return lines


def course_said(res: CellResult) -> list[str]:
    """The run-course rules that decided (`analysis.rules`): re-runs, a live stop, and
    whether each confirmation round counted."""
    out: list[str] = []
    for k, a in enumerate(res.attempts, 1):
        if a.rerun:
            out.append(f"attempt {k} ({a.verdict}): rule {a.rerun}: the cell "
                       f"{rule_says('rerun', a.rerun, 'ran on')}")
    live = res.live
    if live is not None and live.rule:
        out.append(f"live look: rule {live.rule} stopped the run at call "
                   f"{live.calls_to_decision:,}")
    vs = res.vs_baseline
    conf = vs.confirmation if vs is not None else None
    for r in conf.rounds if conf is not None else ():
        if r.rule:
            out.append(f"round {r.index}: rule {r.rule}: "
                       + (f"left out ({r.excluded})" if r.excluded else "counts"))
    return out


def steps_said(res: CellResult, cfg: AnalysisConfig) -> list[str]:
    """The step-time rules that decided (the step times', load's and baseline's tables):
    the step trend, whether a busy host explains it, and against the baseline the
    directions, the doubt that ran rounds and what they settled."""
    def said(rule_id: str, key: str) -> str:
        return f"rule {rule_id}: {rule_says(key, rule_id)}"

    out: list[str] = []
    steps, cpu, busy = res.steps, res.cpu_steps, res.contention
    if steps is not None and steps.rule:
        out.append(f"step times: {said(steps.rule, 'steps')}")
    if steps is not None and steps.slowdown and busy is not None:
        load = load_rule(cfg, busy.share, busy.extra_s, cpu)
        out.append(f"the slowdown beside the host's load: {said(load.id, 'load')}")
    vs = res.vs_baseline
    if vs is None:
        return out
    for name, found, key in (
            ("pooled steps", vs.steps, "pooled"), ("peak RSS", vs.peak_rss, "peak")):
        if found is not None and found.rule:
            out.append(f"vs {vs.baseline}, {name}: {said(found.rule, key)}")
    if vs.peak_rss is not None and vs.peak_rss.direction == "higher":
        peak, _ = first_of(PeakVerdictEvidence(
            cfg, vs.peak_rss.direction, vs.peak_rss.ratio), table("peak-verdict"))
        out.append(f"vs {vs.baseline}, peak RSS: {said(peak.id, 'peak-verdict')}")
    if vs.rule:
        out.append(f"vs {vs.baseline}: {said(vs.rule, 'doubt')}")
    conf = vs.confirmation
    if conf is not None and conf.rule:
        done, _ = first_of(SettledEvidence.of(conf, cfg), table("settled"))
        left, _ = first_of(UnsettledEvidence.of(conf, cfg), table("unsettled"))
        out.append(f"rounds: {said(conf.rule, 'confirm')}; after the last, "
                   f"{said(done.id, 'settled')}; {said(left.id, 'unsettled')}")
    return out
