"""The one place a cell's verdict is set: `decide(facts)`.

The orchestrator gathers what is known about a cell into a `CellFacts` (the agent's
series, how the run ended, the live decision, the GPU precheck, the baseline
comparison and its confirmation rounds) and calls `decide`. Everything that reads a
series into trends lives in `harness.analysis.verdict.within_run`; everything that
turns facts into `ok` / `leak` / `regression` / `not-applicable` ... is here.

Two moments call it: right after a cell ran (`baseline` is None), and once a row's
comparison with its baseline is known (`baseline` and `within`, the within-run verdict
held in memory, are given). Nothing is written before the second.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from harness.analysis.config import AnalysisConfig
from harness.analysis.kinds import GOOD, Verdict
from harness.analysis.records import (
    Confirmation,
    LiveDecision,
    LiveRun,
    PeakComparison,
    StepComparison,
    VsBaseline,
)
from harness.analysis.verdict import CellVerdict, within_run
from harness.gpu import runtime_incompatibility
from harness.protocol.ingest import Series
from harness.runtimes.base import RunOutcome

FLAG_PREFIXES = ("no-gpu:", "heap:")


@dataclass(frozen=True)
class Baseline:
    """A cell measured against its row's baseline (pooled steps, peaks, rounds)."""

    label: str
    steps: StepComparison | None
    peaks: PeakComparison | None
    cpu: StepComparison | None = None
    busy: float = 0.0                          # worse of the two run-queue delay shares
    confirmation: Confirmation | None = None   # interleaved rounds, when they ran
    rounds: int = 0                            # rounds the cell's settings asked for


@dataclass(frozen=True)
class CellFacts:
    """Everything known about one cell when its verdict is set."""

    cfg: AnalysisConfig
    series: Series = field(default_factory=Series)
    outcome: RunOutcome = field(default_factory=lambda: RunOutcome(exit_code=None))
    wants_gpu: bool = False
    live: LiveDecision | None = None
    precheck: tuple[str, str] | None = None    # (not-applicable|unsupported|degraded, why)
    unavailable: str | None = None             # the image / engine could not be had
    baseline: Baseline | None = None
    within: CellVerdict | None = None          # the within-run verdict, with `baseline`


def decide(facts: CellFacts) -> CellVerdict:
    """The cell's verdict from everything known about it."""
    if facts.unavailable is not None:
        return CellVerdict("unavailable", facts.unavailable)
    if facts.precheck is not None and facts.precheck[0] == "not-applicable":
        return CellVerdict("not-applicable", facts.precheck[1])
    if facts.baseline is not None:
        assert facts.within is not None, "a row comparison needs the within-run verdict"
        return _vs_baseline(facts.baseline, facts.within, facts.cfg)
    verdict = within_run(facts.series, facts.outcome, facts.cfg)
    _use_live(verdict, facts.live, facts.series)
    _gpu_afterwards(verdict, facts.series, facts.outcome, facts.precheck)
    flag_cell(facts.wants_gpu, verdict, facts.series)
    return verdict


def suspects(base: Baseline, cfg: AnalysisConfig) -> bool:
    """Whether the pooled comparison leaves the step time in doubt: a suspected change,
    or either cell ran on a busy host (load can hide a change as well as fake one)."""
    steps = base.steps
    return steps is not None and (steps.direction != "~" or base.busy >= cfg.recheck_share)


def needs_rounds(base: Baseline, cfg: AnalysisConfig) -> bool:
    """Whether interleaved rounds are run to settle the doubt (`suspects`)."""
    return suspects(base, cfg) and base.rounds > 0


def pooled_text(steps: StepComparison, label: str) -> str:
    """What the pooled step-time test said, for reasons and progress lines."""
    return f"steps {steps.ratio:.2f}x {label} pooled (p={steps.p_value:.2g})"


def _vs_baseline(base: Baseline, within: CellVerdict, cfg: AnalysisConfig) -> CellVerdict:
    """A pooled step-time change is only suspected until interleaved rounds confirm
    it; without rounds it is reported as `suspected`."""
    label, steps, peaks = base.label, base.steps, base.peaks
    findings = list(within.findings)
    vs = VsBaseline(label, steps, base.cpu, peaks)
    verdict, reason = within.verdict, within.reason

    def out(verdict: Verdict, reason: str) -> CellVerdict:
        return dataclasses.replace(within, verdict=verdict, reason=reason,
                                   findings=findings, vs_baseline=vs)

    if verdict not in GOOD:
        return out(verdict, reason)
    why: list[str] = []
    suspected = None
    if steps is not None and suspects(base, cfg):
        pooled = pooled_text(steps, label)
        vs = dataclasses.replace(vs, direction=(
            "suspected " + steps.direction if steps.direction != "~" else "~"))
        conf = base.confirmation
        if conf is not None:
            # The rounds decide, whatever the pooled steps suspected.
            vs = dataclasses.replace(vs, confirmation=conf, direction=conf.direction)
            if conf.direction == "slower":
                why.append(f"steps {conf.ratio:.2f}x {label}, {conf.reason}")
            findings.append(f"vs {label}: {conf.reason}")
        elif steps.direction == "slower":
            suspected = f"{pooled}; not confirmed (rounds: 0)"
    if (peaks is not None and peaks.direction == "higher"
            and peaks.ratio >= cfg.peak_regression_ratio):
        why.append(f"peak RSS {peaks.ratio:.2f}x {label}")
    flags = [f for f in findings if str(f).startswith(FLAG_PREFIXES)]
    if why:
        findings.append("regression")
        return out("regression", "; ".join(why + flags))
    if suspected:
        return out("suspected", "; ".join([suspected, *flags]))
    return out(verdict, reason)


def _use_live(verdict: CellVerdict, decision: LiveDecision | None, series: Series) -> None:
    """The live decision is valid under repeated looks; the post-run fit on a short
    series often is not decided, so the live one wins where they differ."""
    if decision is None:
        return
    # When the host wrote its decision vs how far the agent got before it stopped.
    calls_run = (series.end or {}).get("iterations")
    verdict.live = LiveRun(**{f.name: getattr(decision, f.name)
                              for f in dataclasses.fields(decision)},
                           calls_to_decision=decision.iterations,
                           calls_run=calls_run if isinstance(calls_run, int)
                           else series.measured)
    if decision.verdict == "leak" and verdict.verdict in ("ok", "ambiguous", "plateau"):
        verdict.verdict, verdict.reason, verdict.carrier = "leak", decision.reason, "heap"
        if "leak" not in verdict.findings:
            verdict.findings.insert(0, "leak")
    elif decision.verdict == "stable" and verdict.verdict == "ambiguous":
        verdict.verdict, verdict.reason = "ok", decision.reason
    verdict.reason += (f"; decided live at call {decision.iterations}, stopped at call "
                       f"{verdict.live.calls_run}")


def _gpu_afterwards(verdict: CellVerdict, series: Series, ended: RunOutcome,
                    pre: tuple[str, str] | None) -> None:
    """Run-time incompatibility (PTX JIT, no kernel image) when labels did not say."""
    if pre is not None:
        verdict.findings.append(f"{pre[0]}: {pre[1]}")
    first = next((s["dt"][0] for s in series.samples if s.get("src") == "step"
                  and s.get("dt")), None)
    times = series.step_times()
    median = float(np.median(times)) if len(times) else None
    err = str(((series.end or {}).get("error") or {}).get("traceback", ""))
    found = runtime_incompatibility(first, median, ended.log_tail + err)
    if pre is not None and pre[0] == "unsupported":
        verdict.findings.append(unsupported_evidence(verdict, series, found))
    if found is None:
        return
    if found[0] == "not-applicable" and verdict.verdict in ("crash", "ok", "ambiguous"):
        verdict.verdict, verdict.reason = "not-applicable", found[1]
    else:
        verdict.findings.append(f"{found[0]}: {found[1]}")


def framework_device(series: Series) -> str | None:
    """Where the scenario says its framework ran (`info()["device"]`), lower-cased."""
    info = (series.end or {}).get("info")
    device = info.get("device") if isinstance(info, dict) else None
    return str(device).lower() if device is not None else None


def unsupported_evidence(verdict: CellVerdict, series: Series,
                         found: tuple[str, str] | None) -> str:
    """What running an NVIDIA-unsupported image/GPU pair showed, as a finding."""
    device = framework_device(series)
    if found is not None:
        return f"unsupported pair, run to decide: {found[0]} from evidence ({found[1]})"
    if verdict.verdict == "timeout":
        return ("unsupported pair, run to decide: undecided: killed at the short deadline "
                "with no CUDA error in the log (PTX JIT compiling every kernel looks like "
                "this): run the cell alone with a longer timeout to tell")
    if verdict.verdict == "crash":
        return ("unsupported pair, run to decide: crash with no CUDA compatibility error "
                "in the log: the failure is not attributed to the GPU")
    if device is not None and "gpu" not in device:
        return (f"unsupported pair, run to decide: undecided: the framework ran on "
                f"{device}, not the GPU, so the run proves nothing about the GPU "
                f"({series.measured} iterations, no CUDA error in the log)")
    return (f"unsupported pair, run to decide: ran {series.measured} iterations on the GPU "
            "with no CUDA compatibility error: a real measurement")


def flag_cell(wants_gpu: bool, verdict: CellVerdict, series: Series) -> None:
    """Say in the verdict's reason (console, report) what a reader must not miss: a GPU
    cell whose framework saw no GPU, the heap notes of reading (mallinfo's 4 GiB wrap)."""
    extra: list[str] = []
    device = framework_device(series)
    if wants_gpu and device is not None and "gpu" not in device \
            and verdict.verdict not in ("not-applicable",):
        extra.append(f"no-gpu: a GPU cell, but the framework saw no GPU and ran on {device}: "
                     "measured on the CPU")
    extra.extend(series.notes)
    for text in extra:
        if text not in verdict.findings:
            verdict.findings.append(text)
        verdict.reason = f"{verdict.reason}; {text}"
