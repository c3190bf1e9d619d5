"""One verdict per cell, from how it ended and what its series show.

Which memory source may carry a leak: the glibc heap (clean with PYTHONMALLOC=malloc)
alone; RSS only when USS agrees (file-backed pages, arenas and page-cache noise move
RSS, not USS); the GPU and the framework allocator alone. The container cgroup (v1
counts page cache) is reported, never decisive. RSS growing with nothing to confirm
it is `ambiguous`, which makes the orchestrator run the cell again, longer. So is a
leak a cache still filling could explain (`growth.fill_check`): its reason gives the
growth, the calls and the run that settles it (`CellVerdict.rerun`, 4x the calls).

`verdict_of` words the rule the table (`rules.RULES`) fires on what a run showed
(`RunReading`, read once by `decision.read_run`: memory, step times in `stepreading`, how
it ended in `outcomes`); `pooled.compare_to_baseline` is the between-cell comparison;
`harness.analysis.decision.decide` turns them (with the run's other facts) into the
verdict. Every number behind a verdict is in `CellVerdict` (and so in the stored
result) so a reader can check it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from harness.analysis.facts import ENDINGS, Facts
from harness.analysis.kinds import BAD, GOOD, Verdict
from harness.analysis.memory import MemoryReading, leaking
from harness.analysis.outcomes import ended_with
from harness.analysis.records import Finding
from harness.analysis.rules import CARRIERS, Evidence, first_rule
from harness.analysis.trends import Explained, GpuTime, LiveRun, MemoryTrend, StepTrend
from harness.analysis.vsbaseline import VsBaseline
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


def verdict_of(r: RunReading, series: Series) -> CellVerdict:
    """The verdict the table decides on a run's evidence, with its words."""
    rule, _ = first_rule(r.evidence)
    mem, steps, f = r.mem, r.steps, r.evidence.facts

    def out(reason: str, carrier: str | None, findings: tuple[Finding, ...],
            **more: object) -> CellVerdict:
        return CellVerdict(rule.verdict, reason, carrier, findings,
                           memory=mem.memory, steps=steps, cpu_steps=r.cpu,
                           rule=rule.id, facts=f, **more)  # type: ignore[arg-type]

    if r.ended is not None and (rule.id in ENDINGS or rule.id == "timeout-leak"):
        kind, reason, carrier, found = ended_with(r.ended, mem, series, steps)
        assert kind == rule.says, (kind, rule.id)
        return out(reason, carrier, found)
    findings = list(r.notes)
    if f.slowdown:
        findings.append(Finding("busy-host", f.busy) if f.busy else
                        Finding("slowdown", "slowdown"))
    if rule.id == "runaway":
        grew = f"; {mem.reason}" if mem.kind == "leak" else ""
        return out(f"{f.runaway}{grew}", mem.carrier or "uss+rss",
                   (Finding("ended", f.runaway), *mem.findings, *findings))
    if rule.id == "gpu-in-run":
        return out(str(f.gpu_unusable), mem.carrier, tuple(findings))
    if rule.id == "leak":
        return out(mem.reason, mem.carrier, (*mem.findings, *findings), contention=r.busy)
    if rule.id == "capped":
        return out(f"{mem.reason}; but the run stopped at {f.capped}: a leak, or a cache "
                   "the rest of the budget would show levelling off; running it again for "
                   f"up to {f.budget_calls:,} calls", mem.carrier, tuple(findings),
                   rerun=f.budget_calls)
    if rule.id == "short":
        return out(f"{mem.reason}; but its budget ended it after {f.short}: a leak, or a "
                   "cache of as many entries still filling; running it again for "
                   f"{f.budget_calls:,} calls", mem.carrier, tuple(findings),
                   rerun=f.budget_calls)
    if rule.id == "rising":
        return out(f"{f.slowdown}; rising through the whole run: a slowdown, or a cost "
                   "that cycles with the scenario's input; running it again for "
                   f"{f.rising:,} calls to see it last", None, tuple(findings),
                   contention=r.busy, gpu_time=r.gpu, rerun=f.rising)
    if rule.id == "slowdown":
        assert steps is not None
        if mem.fill is not None:
            findings.append(Finding("note", f"{mem.carrier} {mem.fill.said(False)}"))
        return out(f.slowdown, None, tuple(findings), contention=r.busy, gpu_time=r.gpu)
    if rule.id in ("filling", "creep"):
        # Growing so far: a leak or a cache still filling; a longer run tells.
        return out(mem.reason, mem.carrier, tuple(findings), rerun=mem.rerun)
    if rule.id == "busy-host":
        assert steps is not None
        return out(f"late steps {steps.ratio:.2f}x early, but {f.busy}", None,
                   tuple(findings), contention=r.busy)
    if rule.id in ("insufficient", "unsure", "unconfirmed"):
        return out(mem.reason, mem.carrier, tuple(findings))
    missed = f"; {mem.missed_said}" if mem.missed_said else ""
    if rule.id == "plateau":
        return out(mem.reason + missed, mem.carrier, mem.findings)
    assert rule.id == "ok", rule.id
    return out(f"{mem.reason}, no slowdown{missed}", mem.carrier, tuple(findings))
