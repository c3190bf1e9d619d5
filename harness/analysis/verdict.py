"""One verdict per cell, from how it ended and what its series show: `verdict_of`
words the rule the table (`rules.RULES`) fires on a `RunReading`; every number behind
a verdict is in `CellVerdict` (and so in the stored result). Which memory source may
carry a leak: the heap alone, RSS only when USS agrees, the GPU and the framework
allocator alone (file-backed pages, arenas and the page cache move RSS, not USS); the
container cgroup (v1 counts page cache) is reported, never decisive."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.analysis.facts import Facts
from harness.analysis.kinds import BAD, GOOD, Verdict
from harness.analysis.memory import MemoryReading
from harness.analysis.outcomes import ended_with
from harness.analysis.records import (
    Explained,
    Finding,
    GpuTime,
    LiveRun,
    MemoryTrend,
    StepTrend,
    VsBaseline,
)
from harness.analysis.rules import (
    CARRIERS,
    ONE_RUN,
    TIMEOUT_BUSY,
    Evidence,
    Rule,
    first_rule,
    leaking,
)
from harness.protocol.series import Series

__all__ = [
    "BAD",
    "CARRIERS",
    "GOOD",
    "CellVerdict",
    "RunReading",
    "Verdict",
    "leaking",
    "verdict_of",
]


@dataclass(frozen=True)
class CellVerdict:
    """The verdict of one cell and every number behind it (`decide` sets it, once)."""

    verdict: Verdict
    reason: str
    carrier: str | None = None
    findings: tuple[Finding, ...] = ()
    memory: dict[str, MemoryTrend] = field(default_factory=dict)
    steps: StepTrend | None = None
    vs_baseline: VsBaseline | None = None
    live: LiveRun | None = None             # early-stop mode: the sequential decision
    cpu_steps: StepTrend | None = None      # CPU time per step, early vs late (evidence)
    contention: Explained | None = None     # run-queue delay behind a slowdown
    gpu_time: GpuTime | None = None         # device busy time and clock behind a slowdown
    rerun: int | None = None                # calls an ambiguous cell's next run measures
    rule: str = ""                          # the rule that decided (`rules.RULES`)
    facts: Facts | None = None              # what the rules read beside memory

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)

    def has(self, kind: str) -> bool:
        """Whether a finding of this kind is among the findings."""
        return any(f.kind == kind for f in self.findings)


@dataclass(frozen=True)
class RunReading:
    """What one run showed, read once: the evidence the rules decide on (`evidence`)
    and the objects its words are made of."""

    mem: MemoryReading
    evidence: Evidence
    steps: StepTrend | None = None
    cpu: StepTrend | None = None
    at_speed: bool = False
    busy: Explained | None = None
    gpu: GpuTime | None = None
    ended: tuple[Verdict, str] | None = None
    notes: tuple[Finding, ...] = ()       # the cyclic-garbage note, a corrected slowdown
    sign: tuple[str, str] | None = None   # what the log and first step showed of the GPU


def _out(r: RunReading, rule: Rule[Evidence], reason: str, carrier: str | None,
         findings: tuple[Finding, ...], **more: object) -> CellVerdict:
    return CellVerdict(rule.verdict, reason, carrier, findings, memory=r.mem.memory,
                       steps=r.steps, cpu_steps=r.cpu, rule=rule.id,
                       facts=r.evidence.facts, **more)  # type: ignore[arg-type]


def _found(r: RunReading) -> list[Finding]:
    """The findings every rule's words carry: the notes, and a slowdown (or the busy
    host that voided one) where the steps showed it."""
    f = r.evidence.facts
    out = list(r.notes)
    if f.slowdown:
        out.append(Finding("busy-host", f.busy) if f.busy else Finding("slowdown", "slowdown"))
    return out


def _ended(r: RunReading, series: Series, rule: Rule[Evidence]) -> CellVerdict:
    assert r.ended is not None
    kind, reason, carrier, found = ended_with(r.ended, r.mem, series, r.steps)
    assert kind == rule.says, (kind, rule.id)
    return _out(r, rule, reason, carrier, found)


def _runaway(r: RunReading, _: Series, rule: Rule[Evidence]) -> CellVerdict:
    mem, f = r.mem, r.evidence.facts
    grew = f"; {mem.reason}" if mem.kind == "leak" else ""
    return _out(r, rule, f"{f.runaway}{grew}", mem.carrier or "uss+rss",
                (Finding("ended", f.runaway), *mem.findings, *_found(r)))


def _crowded(r: RunReading, _: Series, rule: Rule[Evidence]) -> CellVerdict:
    assert r.ended is not None
    read = f"; read before it: {r.mem.kind} ({r.mem.reason})" if r.mem.reason else ""
    return _out(r, rule, f"{r.ended[1]}, but {r.evidence.facts.crowded}: the deadline "
                "measured a busy host, not the scenario, and the shortened run decides "
                f"nothing{read}; raise timeout: or run it on a quieter host", r.mem.carrier,
                (Finding("ended", r.ended[1]), *_found(r)))


def _gpu_in_run(r: RunReading, _: Series, rule: Rule[Evidence]) -> CellVerdict:
    return _out(r, rule, str(r.evidence.facts.gpu_unusable), r.mem.carrier, tuple(_found(r)))


def _leak(r: RunReading, _: Series, rule: Rule[Evidence]) -> CellVerdict:
    return _out(r, rule, r.mem.reason, r.mem.carrier, (*r.mem.findings, *_found(r)),
                contention=r.busy)


def _cut(r: RunReading, _: Series, rule: Rule[Evidence]) -> CellVerdict:
    """A leak read in a run its cap (rule `capped`) or its budget (`short`) cut short."""
    f = r.evidence.facts
    why = (f"the run stopped at {f.capped}: a leak, or a cache the rest of the budget would "
           "show levelling off; running it again for up to" if rule.id == "capped" else
           f"its budget ended it after {f.short}: a leak, or a cache of as many entries "
           "still filling; running it again for")
    return _out(r, rule, f"{r.mem.reason}; but {why} {f.budget_calls:,} calls", r.mem.carrier,
                tuple(_found(r)), rerun=f.budget_calls)


# Memory readings of growth not decided yet: a slowdown beside one says it.
GROWING = ("filling", "creep", "unconfirmed")


def _grows(r: RunReading) -> str:
    """"; and memory grows: ..." where memory grows and is not decided yet: each call
    slower and memory growing is the seeds' symptom, never a slowdown alone in words
    (issue 78: a late native leak read `slowdown` while its RSS went from 35 to 112 MB,
    and not a word of memory)."""
    return f"; and memory grows: {r.mem.reason}" if r.mem.kind in GROWING else ""


def _asks(r: RunReading, calls: int) -> int:
    """The calls a slowdown's next run measures: its own, or more where memory grows
    undecided beside it (a fill asks 4x, a slowdown 2x: air 0.15.0's leak, each call
    walking what the calls before it kept, was run again for the slowdown's length and
    its growth stayed `a leak or a cache still filling`)."""
    grows = (r.mem.rerun or 0) if r.mem.kind in GROWING else 0
    return max(calls, grows)


def _rising(r: RunReading, _: Series, rule: Rule[Evidence]) -> CellVerdict:
    f = r.evidence.facts
    return _out(r, rule, f"{f.slowdown}; rising through the whole run: a slowdown, or a "
                "cost that cycles with the scenario's input; running it again for "
                f"{f.rising:,} calls to see it last{_grows(r)}", None, tuple(_found(r)),
                contention=r.busy, gpu_time=r.gpu, rerun=_asks(r, f.rising))


def _one_run(r: RunReading, series: Series, rule: Rule[Evidence]) -> CellVerdict:
    f = r.evidence.facts
    calls = 2 * series.measured
    return _out(r, rule, f"{f.slowdown}; {f.once}, not replicated: a suspicion, not a "
                f"finding (a busy host, a cost that cycles with the input); a run of "
                f"{calls:,} calls that reads it too confirms it{_grows(r)}", None,
                tuple(_found(r)),
                contention=r.busy, gpu_time=r.gpu, rerun=_asks(r, calls))


def _slowdown(r: RunReading, _: Series, rule: Rule[Evidence]) -> CellVerdict:
    assert r.steps is not None
    found = _found(r)
    reason = r.evidence.facts.slowdown + _grows(r)
    if r.mem.kind in GROWING:
        found.append(Finding("note", f"memory grows: {r.mem.reason}"))
    elif r.mem.fill is not None:
        found.append(Finding("note", f"{r.mem.carrier} {r.mem.fill.said(False)}"))
    return _out(r, rule, reason, None, tuple(found), contention=r.busy, gpu_time=r.gpu)


def _filling(r: RunReading, _: Series, rule: Rule[Evidence]) -> CellVerdict:
    # Growing so far: a leak or a cache still filling; a longer run tells.
    return _out(r, rule, r.mem.reason, r.mem.carrier, tuple(_found(r)), rerun=r.mem.rerun)


def _busy(r: RunReading, _: Series, rule: Rule[Evidence]) -> CellVerdict:
    assert r.steps is not None
    return _out(r, rule, f"late steps {r.steps.ratio:.2f}x early, but "
                f"{r.evidence.facts.busy}", None, tuple(_found(r)), contention=r.busy)


def _undecided(r: RunReading, _: Series, rule: Rule[Evidence]) -> CellVerdict:
    return _out(r, rule, r.mem.reason, r.mem.carrier, tuple(_found(r)))


def _missed(r: RunReading) -> str:
    return f"; {r.mem.missed_said}" if r.mem.missed_said else ""


def _plateau(r: RunReading, _: Series, rule: Rule[Evidence]) -> CellVerdict:
    return _out(r, rule, r.mem.reason + _missed(r), r.mem.carrier, r.mem.findings)


def _ok(r: RunReading, _: Series, rule: Rule[Evidence]) -> CellVerdict:
    return _out(r, rule, f"{r.mem.reason}, no slowdown{_missed(r)}", r.mem.carrier,
                tuple(_found(r)))


_Words = Callable[[RunReading, Series, Rule[Evidence]], CellVerdict]
# Each rule's words, by its id: every rule of `rules.RULES` a run alone can fire. The
# others are worded where their facts are: the image not had and the GPU precheck by
# `decision.decide`, the baseline's with the comparison's figures (`decision`).
WORDS: dict[str, _Words] = {
    "timeout-leak": _ended, TIMEOUT_BUSY: _crowded,
    "oom": _ended, "timeout": _ended, "crash": _ended, "not-applicable": _ended,
    "runaway": _runaway, "gpu-in-run": _gpu_in_run, "leak": _leak, "capped": _cut,
    "short": _cut, "rising": _rising, ONE_RUN: _one_run, "slowdown": _slowdown,
    "filling": _filling,
    "creep": _filling, "busy-host": _busy, "insufficient": _undecided,
    "unsure": _undecided, "unconfirmed": _undecided, "plateau": _plateau, "ok": _ok,
}
WORDED_ELSEWHERE = frozenset({"unavailable", "gpu-precheck", "regression", "unsettled",
                              "suspected"})


def verdict_of(r: RunReading, series: Series) -> CellVerdict:
    """The verdict the table decides on a run's evidence, in its rule's words (`WORDS`)."""
    rule, _ = first_rule(r.evidence)
    return WORDS[rule.id](r, series, rule)
