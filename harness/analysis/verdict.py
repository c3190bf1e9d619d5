"""One verdict per cell, from how it ended and what its series show.

Which memory source may carry a leak: the glibc heap (clean with PYTHONMALLOC=malloc)
alone; RSS only when USS agrees (file-backed pages, arenas and page-cache noise move
RSS, not USS); the GPU and the framework allocator alone. The container cgroup (v1
counts page cache) is reported, never decisive. RSS growing with nothing to confirm
it is `ambiguous`, which makes the orchestrator run the cell again, longer. So is a
leak a cache still filling could explain (`fill.fill_check`): its reason gives the
growth, the calls and the run that settles it (`CellVerdict.rerun`, 4x the calls).

A slowdown is the wall-clock trend (late steps slower than early ones, rising bin
after bin). CPU time per step is evidence, not a veto: a step that waits longer (a
sleep, a lock, a GPU) slows with flat CPU time. What can void a slowdown is measured
contention: when the rise in the stepping thread's run-queue delay (or the cgroup's
throttling) per step accounts for `contention_share` of the extra step time, and CPU
time per step did not rise by half of it (more work), the host was busy and the cell is
`ambiguous` (run again), with the reason. Where the agent timed its canary loop, step
and CPU times are first put at one CPU speed: on a shared machine the CPU's speed moves
by up to 1.9x within a run (a hyperthread sibling), with no run-queue delay to show.
That correction can only explain a wall-clock slowdown away (or lower its figure), never
make one from a flat wall clock (`step_reading`, the one place that rule lives).

`within_run` is the within-run reading (outcome first, then memory and step trends);
`compare_to_baseline` the between-cell comparison; `harness.analysis.decision.decide`
turns them (with the run's other facts) into the verdict. Every number behind
a verdict is in `CellVerdict` (and so in the stored result) so a reader can check it.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

import numpy as np

from harness.analysis.contention import at_one_speed, cpu_at_one_speed, explain
from harness.analysis.facts import ENDINGS, Facts, capped_at
from harness.analysis.gputime import gpu_evidence, gpu_time, slowdown_label
from harness.analysis.growth import step_trend
from harness.analysis.kinds import BAD, GOOD, Verdict
from harness.analysis.memory import (
    MemoryReading,
    leaking,
    measured_calls,
    memory_reading,
    seconds_per_call,
)
from harness.analysis.outcomes import ended_with
from harness.analysis.pooled import compare_peaks, compare_steps
from harness.analysis.records import Finding
from harness.analysis.rules import CARRIERS, Evidence, first_rule
from harness.analysis.trends import Explained, GpuTime, LiveRun, MemoryTrend, StepTrend
from harness.analysis.vsbaseline import PeakComparison, StepComparison, VsBaseline
from harness.gpu.logsigns import NOT_APPLICABLE_TEXT
from harness.protocol.series import Series
from harness.protocol.tracebacks import raised_at
from harness.runtimes.base import RunOutcome
from harness.thresholds import AnalysisConfig

__all__ = ["BAD", "CARRIERS", "GOOD", "CellVerdict", "Verdict", "compare_to_baseline",
           "leaking", "within_run"]
# A framework's own out-of-memory on the device: the process is not OOM-killed, the
# framework raises (TF's ResourceExhaustedError from its BFC allocator, PyTorch's
# OutOfMemoryError, a bare CUDA error) and the agent ends with an error.
GPU_OOM = re.compile(
    r"ResourceExhaustedError|OOM when allocating tensor|CUDA out of memory|"
    r"CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|torch\.cuda\.OutOfMemoryError|"
    r"failed to allocate [\d.]+[KMG]?i?B? .*from device: CUDA_ERROR_OUT_OF_MEMORY")
# The allocation report a framework prints with it (TF's BFC allocator summary and the
# OOM line, PyTorch's "Tried to allocate ... already allocated" sentence).
ALLOCATION_REPORT = re.compile(
    r"OOM when allocating tensor.*|Tried to allocate .*|Sum Total of in-use chunks.*|"
    r"^\s*(?:Limit|InUse|MaxInUse|NumAllocs|MaxAllocSize|Largest free block)\s*[:=].*|"
    r"Current allocation summary follows.*|report_tensor_allocations_upon_oom.*|"
    r"CUDA_ERROR_OUT_OF_MEMORY.*", re.MULTILINE)


def allocation_report(text: str, limit: int = 12) -> list[str]:
    """The framework's allocation report lines found in a log, in order, deduplicated."""
    out: list[str] = []
    for m in ALLOCATION_REPORT.finditer(text):
        line = m.group(0).strip()[:300]
        if line and line not in out:
            out.append(line)
        if len(out) >= limit:
            break
    return out


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


def cpu_trend(series: Series, cfg: AnalysisConfig) -> StepTrend | None:
    """CPU time per step (at one CPU speed where the canary was timed), early vs late;
    None if the agent did not record it."""
    cpu = cpu_at_one_speed(series)
    if cpu is None:
        cpu = series.cpu_times()
    if cpu is None or not len(cpu):
        return None
    return step_trend(cpu, cfg)


def step_reading(series: Series, cfg: AnalysisConfig
                 ) -> tuple[StepTrend | None, bool, Finding | None]:
    """The step-time trend a slowdown verdict reads: the one rule between the wall clock
    and the CPU-speed correction.

    A slowdown is what the wall clock shows. Where the agent timed its canary loop,
    `contention.at_one_speed` puts the step's CPU work at one CPU speed; that corrected
    series may only lower the wall clock's reading, never raise it. It is read where its
    ratio is no higher than the wall clock's (a slower CPU explains a slowdown away, or
    part of it) and, where the wall clock shows no slowdown, where it shows none either;
    else the wall clock's trend stands. So a step spinning on a busy device, recorded
    without utilization, that a faster CPU "sped up" although no CPU made it faster (a
    flat 42.8 ms H100 step read 1.55x) stays flat; the corrected slowdown is said as a
    note, never as a verdict.

    Returns:
        The trend (None without step times), whether it is the corrected one (its
        reason says "at one CPU speed"), and the note of a corrected slowdown the wall
        clock did not show.
    """
    wall_times = series.step_times()
    if not len(wall_times):
        return None, False, None
    wall = step_trend(wall_times, cfg)
    same_speed = at_one_speed(series)
    if same_speed is None or not len(same_speed):
        return wall, False, None
    corrected = step_trend(same_speed, cfg)
    if corrected.ratio <= wall.ratio and (wall.slowdown or not corrected.slowdown):
        return corrected, True, None
    if wall.slowdown or not corrected.slowdown:
        return wall, False, None
    return wall, False, Finding("note", (
        f"no slowdown on the wall clock (late steps {wall.ratio:.2f}x early); at one CPU "
        f"speed {corrected.ratio:.2f}x, which the CPU-speed correction alone made: not a "
        "slowdown"))


def _came_back(steps: StepTrend | None) -> Finding | None:
    if steps is None or not steps.came_back_at:
        return None
    return Finding("note", (
        f"late steps {steps.ratio:.2f}x early, but back under half that rise from step "
        f"{steps.came_back_at:,} on: a cost that cycles with the scenario's input, not a "
        "slowdown that lasts"))


def _slowdown_reason(steps: StepTrend, cpu: StepTrend | None, at_speed: bool,
                     gpu: GpuTime | None = None) -> str:
    text = f"late steps {steps.ratio:.2f}x early (p={steps.p_value:.2g}"
    text += ", at one CPU speed)" if at_speed else ")"
    if cpu is not None and not cpu.insufficient:
        # Half the wall-clock rise (in seconds) in CPU time: the step does more work;
        # less: it waits longer (sleep, lock, device).
        more_cpu = cpu.late_median_s - cpu.early_median_s
        more_wall = steps.late_median_s - steps.early_median_s
        bound = slowdown_label("CPU-bound" if more_cpu >= more_wall / 2 else "wait-bound", gpu)
        text += f"; CPU time per step {cpu.ratio:.2f}x ({bound})"
    return text + gpu_evidence(gpu)


def _outcome_verdict(series: Series, outcome: RunOutcome) -> tuple[Verdict, str] | None:
    end = series.end
    if outcome.error:
        return "crash", outcome.error
    if outcome.timed_out:
        return "timeout", f"killed at the {outcome.duration_s:.0f}s deadline"
    text = outcome.log_tail + (str(end.get("error", {}).get("traceback", "")) if end else "")
    if outcome.exit_code == 137:
        limit = outcome.mem_limit_bytes
        peak = outcome.details.get("host_max_usage")
        near = bool(limit and isinstance(peak, int) and peak >= 0.9 * limit)
        if outcome.oom_killed or near:
            how = "OOMKilled" if outcome.oom_killed else f"cgroup peak {peak} near limit"
            return "oom", f"exit 137, {how} (limit {limit} bytes)"
        return "crash", "killed by SIGKILL from outside (exit 137, not OOMKilled)"
    if GPU_OOM.search(text) and (outcome.exit_code not in (0, None) or (
            end is not None and end.get("status") == "error")):
        report = allocation_report(text)
        what = GPU_OOM.search(text).group(0)  # type: ignore[union-attr]
        return "oom", (f"out of device memory in the framework ({what})" +
                       (": " + " | ".join(report) if report else
                        "; the framework printed no allocation report"))
    if NOT_APPLICABLE_TEXT.search(text):
        return "not-applicable", NOT_APPLICABLE_TEXT.search(text).group(0)  # type: ignore[union-attr]
    if end is not None and end.get("status") == "error":
        err = end.get("error") or {}
        where = raised_at(str(err.get("traceback", "")))
        return "crash", (f"{err.get('type', 'error')}: {str(err.get('message', ''))[:300]}"
                         + (f" (at {where})" if where else ""))
    if outcome.exit_code not in (0, None):
        last = [ln for ln in outcome.log_tail.splitlines() if ln.strip()][-1:]
        return "crash", f"exit code {outcome.exit_code}" + (f": {last[0][:200]}" if last else "")
    if end is None:
        return "crash", "the agent ended without an end record"
    return None


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


def read_run(series: Series, outcome: RunOutcome, cfg: AnalysisConfig, again: bool = True,
             gpu_unusable: str | None = None, first: bool = False) -> RunReading:
    """Everything the rules read of one run, built once: memory by `memory.
    memory_reading` (the reading the live decider makes on the samples so far), the
    step-time trend (`step_reading`), contention behind a slowdown, how the run ended."""
    mem = memory_reading(series, cfg, again)
    steps, at_speed, unseen = step_reading(series, cfg)
    cpu = cpu_trend(series, cfg) if steps is not None else None
    ended = _outcome_verdict(series, outcome)
    busy: Explained | None = None
    gpu: GpuTime | None = None
    slowdown = voided = ""
    if steps is not None and steps.slowdown:
        gpu = gpu_time(series, cfg.step_window, steps.late_median_s - steps.early_median_s)
        busy = explain(series, cfg.step_window, steps.late_median_s - steps.early_median_s,
                       count_speed=not at_speed)
        slowdown = _slowdown_reason(steps, cpu, at_speed, gpu)
        # Contention voids a slowdown only when the step did not do more work: CPU time
        # per step rising by half the extra time says it did, whatever the load.
        more_work = cpu is not None and not cpu.insufficient and (
            cpu.late_median_s - cpu.early_median_s
            >= (steps.late_median_s - steps.early_median_s) / 2)
        if busy is not None and busy.share >= cfg.contention_share and not more_work:
            voided = (f"busy host: {busy.cause} rose {busy.share * busy.extra_s * 1e6:.0f} "
                      f"us/step, {busy.share:.0%} of the {busy.extra_s * 1e6:.0f} us/step "
                      "slowdown")
    capped = capped_at(series) if again else None
    facts = Facts(ended=ended[0] if ended else None, ended_why=ended[1] if ended else "",
                  gpu_unusable=gpu_unusable, filling=mem.filling, slowdown=slowdown,
                  rising=rising_rerun(series) if first and slowdown and not voided else 0,
                  busy=voided, capped=capped[0] if capped else "",
                  budget_calls=capped[1] if capped else 0)
    notes = tuple(f for f in (mem.cyclic, unseen, _came_back(steps)) if f is not None)
    return RunReading(mem, Evidence(mem.memory, facts), steps, cpu, at_speed, busy, gpu,
                      ended, notes)


def within_run(series: Series, outcome: RunOutcome, cfg: AnalysisConfig,
               again: bool = True, gpu_unusable: str | None = None,
               first: bool = False) -> CellVerdict:
    """Within-run verdict for one cell: the table of rules (`rules.RULES`) over what the
    run showed (`read_run`), in words. `again`: an ambiguous cell runs again (its
    repeats are not spent), as its reason says; `first`: this is its first attempt, and
    a slowdown it shows is looked at again in a run twice as long (rule `rising`)."""
    return verdict_of(read_run(series, outcome, cfg, again, gpu_unusable, first), series)


RISE_MAX_S = 30.0       # the longest run that looks at a slowdown again, at the run's pace


def rising_rerun(series: Series) -> int:
    """The calls of a run twice as long as this one, where that run fits `RISE_MAX_S`
    at this run's pace; 0: it does not (a slow step's slowdown stands on one run).

    Steps that rise through a whole run are a slowdown, or a cost that cycles with the
    scenario's input over a cycle longer than the run (issue 49: emoji's 5,153-name
    cycle read `slowdown` 1.41x over 4,800 calls, and `plateau` over 9,700, where the
    steps came back, `growth.came_back`). A slowdown lasts through a run twice as
    long; a cycle longer than that is a cost no run of this length tells apart."""
    calls = 2 * measured_calls(series)
    pace = seconds_per_call(series)
    return calls if calls and pace is not None and calls * pace <= RISE_MAX_S else 0


def verdict_of(r: RunReading, series: Series) -> CellVerdict:
    """The verdict the table decides on a run's evidence, with its words."""
    rule, _ = first_rule(r.evidence)
    mem, steps, f = r.mem, r.steps, r.evidence.facts

    def out(reason: str, carrier: str | None, findings: tuple[Finding, ...],
            **more: object) -> CellVerdict:
        return CellVerdict(rule.says, reason, carrier, findings,
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
    if rule.id == "gpu-in-run":
        return out(str(f.gpu_unusable), mem.carrier, tuple(findings))
    if rule.id == "leak":
        return out(mem.reason, mem.carrier, (*mem.findings, *findings), contention=r.busy)
    if rule.id == "capped":
        return out(f"{mem.reason}; but the run stopped at {f.capped}: a leak, or a cache "
                   "the rest of the budget would show levelling off; running it again for "
                   f"up to {f.budget_calls:,} calls", mem.carrier, tuple(findings),
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


def compare_to_baseline(base_times: np.ndarray, base_peak: float | None,
                        times: np.ndarray, peak: float | None,
                        cfg: AnalysisConfig) -> tuple[StepComparison | None, PeakComparison | None]:
    try:
        steps = compare_steps(base_times, times, cfg) if len(base_times) and len(times) else None
    except ValueError:  # a zero median: nothing to compare
        steps = None
    try:
        peaks = compare_peaks(base_peak, peak, cfg) if base_peak and peak else None
    except ValueError:
        peaks = None
    return steps, peaks
