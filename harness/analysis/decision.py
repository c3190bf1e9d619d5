"""The one place a cell's verdict is set: `decide(facts)`, from a `CellFacts`. A run is read
once (`read_run`), `rules.RULES` fires on it and `verdict_of` words the rule. It runs
after the cell and again once its row's comparison is known; nothing is written before
the second. Every number behind a verdict is kept in `CellVerdict`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.analysis.facts import Facts, budget_ended, capped_at, device_kind, memory_stopped
from harness.analysis.kinds import GOOD, Verdict, kind
from harness.analysis.memory import MemoryReading, memory_reading, risen
from harness.analysis.outcomes import deadline_busy, ended_with, how_it_ended, runtime_sign
from harness.analysis.records import (
    Baseline,
    Confirmation,
    Explained,
    Finding,
    GpuTime,
    LiveDecision,
    LiveRun,
    MemoryTrend,
    StepComparison,
    StepTrend,
    VsBaseline,
)
from harness.analysis.rules import (
    BY_BUDGET,
    DOUBT,
    DOUBT_RULES,
    LENGTH_RULES,
    NO_CHANGE,
    ONE_RUN,
    PEAK_VERDICT_RULES,
    REGRESSION,
    TIMEOUT_BUSY,
    DoubtEvidence,
    Evidence,
    LengthEvidence,
    PeakVerdictEvidence,
    Rule,
    fill_asks,
    first_of,
    first_rule,
    leaking,
    runs_again,
)
from harness.analysis.rules import unsettled as unsettled_words
from harness.analysis.stepreading import read_steps
from harness.protocol.series import Series
from harness.runtimes.base import RunOutcome
from harness.thresholds import AnalysisConfig


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
    """What one run showed, read once: the rules' evidence and the objects its words use."""

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
    """The findings every rule's words carry: the notes, and a slowdown (or the busy host
    that voided one)."""
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
           "show levelling off; running it again for up to "
           f"{f.budget_calls:,} calls" if rule.id == "capped" else
           f"its budget ended it after {f.short}: a leak, or a cache of as many entries "
           f"still filling; {runs_again(f.budget_calls)}")
    return _out(r, rule, f"{r.mem.reason}; but {why}", r.mem.carrier,
                tuple(_found(r)), rerun=f.budget_calls)


# Memory readings of undecided growth: a slowdown beside one says it.
GROWING = ("filling", "creep", "unconfirmed")


def _grows(r: RunReading) -> str:
    """"; and memory grows: ..." where memory grows undecided, "; and memory is undecided:
    ..." where a source neither clearly grows nor is stable (rule `unsure`): a slowdown is
    never said alone while its memory is not known to be flat."""
    if r.mem.kind in GROWING:
        return f"; and memory grows: {r.mem.reason}"
    return f"; and memory is undecided: {r.mem.reason}" if r.mem.kind == "unsure" else ""


def _asks(r: RunReading, calls: int) -> int:
    """The calls a slowdown's next run measures: its own, or more where memory grows
    undecided beside it (a fill asks 4x), so one run answers both."""
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
    elif r.mem.kind == "unsure":
        found.append(Finding("note", f"memory is undecided: {r.mem.reason}"))
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
# Each rule's words, by id, for the rules a run alone can fire; the others are worded
# where their facts are (`decide`, the baseline comparison).
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
    again: bool = True                         # an ambiguous cell runs again (repeats left)
    first: bool = False                        # its first attempt: a slowdown asks a second
    replicated: bool = False                   # an earlier run of the cell read a slowdown
    budget: float | None = None                # the budget set (a run again's is longer)
    room: int | None = None                    # calls a run again may make, `overrun` bound


def read_run(series: Series, outcome: RunOutcome, cfg: AnalysisConfig, again: bool = True,
             first: bool = False, replicated: bool = False,
             room: int | None = None) -> RunReading:
    """Everything the rules read of one run, built once: memory, step times, how the run
    ended and its GPU signs, whether it was cut short, and `replicated`."""
    mem = memory_reading(series, cfg, again)
    st = read_steps(series, cfg, first)
    ended = how_it_ended(series, outcome)
    sign = runtime_sign(series, outcome)
    capped = capped_at(series) if again else None
    leaks = [t for _, t in leaking(mem.memory)]
    short = cut_short(series, cfg, again, capped[0] if capped else "",
                      max(map(risen, leaks)) if leaks else None, room)
    facts = Facts(runaway=memory_stopped(series), ended=ended[0] if ended else None,
                  ended_why=ended[1] if ended else "",
                  crowded=deadline_busy(series, outcome) if ended else "",
                  gpu_unusable=sign[1] if sign and sign[0] == "not-applicable" else None,
                  filling=mem.filling, slowdown=st.slowdown,
                  rising=st.rising, busy=st.voided, capped=capped[0] if capped else "",
                  once=(f"seen in one run of {series.measured:,} calls"
                        if st.slowdown and not st.voided and not replicated else ""),
                  short=short[0] if short else "",
                  budget_calls=capped[1] if capped else short[1] if short else 0)
    notes = (*((mem.cyclic,) if mem.cyclic is not None else ()), *st.notes)
    return RunReading(mem, Evidence(mem.memory, facts), st.steps, st.cpu, st.at_speed,
                      st.busy, st.gpu, ended, notes, sign)


def cut_short(series: Series, cfg: AnalysisConfig, again: bool = True, capped: str = "",
              grown: float | None = 0.0, room: int | None = None) -> tuple[str, int] | None:
    """Whether the budget cut the run short (rule `length-short` or `length-fill`): what
    it made, in words, and the calls its next run makes, since a cache of as many entries
    as the run made calls fills like a leak. `room`: the calls the `overrun` bound leaves
    (None: no bound); `capped`: its cap ended it, in words; `grown`: the leak's growth."""
    ended = budget_ended(series)
    words, done, asked = ended if ended is not None else ("", 0, 0)
    ev = LengthEvidence(cfg, again, capped, grown, words, done, asked, room)
    rule, _ = first_of(ev, LENGTH_RULES)
    if rule.says != BY_BUDGET:
        return None
    return words, fill_asks(ev) if rule.id == "length-fill" else min(cfg.short_calls, asked)


def within_run(series: Series, outcome: RunOutcome, cfg: AnalysisConfig,
               again: bool = True, first: bool = False, replicated: bool = False
               ) -> CellVerdict:
    """Within-run verdict for one cell: `rules.RULES` over `read_run`, in words.

    Args:
        again: An ambiguous cell runs again, as its reason says.
        first: Its first attempt: a slowdown is looked at again (rule `rising`).
        replicated: An earlier run read a slowdown too, so one here stands.
    """
    return verdict_of(read_run(series, outcome, cfg, again, first, replicated), series)


def decide(facts: CellFacts) -> CellVerdict:
    """The cell's verdict from everything known about it: `rules.RULES`, then its words."""
    if facts.baseline is not None:
        assert facts.within is not None, "a row comparison needs the within-run verdict"
        return _vs_baseline(facts.baseline, facts.within, facts.cfg)
    if facts.unavailable is not None or (
            facts.precheck is not None and facts.precheck[0] == "not-applicable"):
        found = Facts(unavailable=facts.unavailable,
                      precheck=facts.precheck[1] if facts.precheck else None,
                      gpu_check=": ".join(facts.precheck) if facts.precheck else "")
        rule, _ = first_rule(Evidence({}, found))
        return CellVerdict(rule.verdict, found.unavailable or str(found.precheck),
                           rule=rule.id, facts=found)
    run = read_run(facts.series, facts.outcome, facts.cfg, facts.again,
                   first=facts.first and facts.again, replicated=facts.replicated,
                   room=facts.room if facts.again else None)
    within = verdict_of(run, facts.series)
    reason = within.reason
    if within.verdict == "ambiguous" and (facts.series.end or {}).get("mode") == "script":
        # More iterations change nothing for a script run whole once: say what would.
        reason = (f"a whole script (no setup()/step()), run once, ended too soon to decide "
                  f"({reason}); define setup(params) and step(state) to measure it per call")
    live = live_run(facts.live, facts.series)
    if live is not None:
        reason = _with_live(within, live, reason, facts.budget)
    findings = [*within.findings, *gpu_findings(
        within.verdict, facts.series, facts.precheck, run.sign,
        run.evidence.facts.gpu_unusable is not None)]
    flags = cell_flags(facts.wants_gpu, within.verdict, facts.series)
    findings += [f for f in flags if f not in findings]
    reason = "; ".join([reason, *(f.text for f in flags)])
    found = within.facts or Facts()
    if facts.precheck is not None:
        found = dataclasses.replace(found, gpu_check=": ".join(facts.precheck))
    return dataclasses.replace(within, reason=reason, findings=tuple(findings), live=live,
                               facts=found)


def doubt(base: Baseline, cfg: AnalysisConfig) -> Rule[DoubtEvidence]:
    """The rule of `rules.DOUBT_RULES` that fires on the pooled comparison."""
    steps = base.steps
    return first_of(DoubtEvidence(cfg, steps.direction if steps is not None else "",
                                    base.busy), DOUBT_RULES)[0]


def busy_doubt(base: Baseline, cfg: AnalysisConfig) -> bool:
    """Whether the doubt table would ask rounds of the host's load alone (`doubt-busy`),
    whatever the pooled steps say."""
    return first_of(DoubtEvidence(cfg, NO_CHANGE, base.busy), DOUBT_RULES)[0].id == (
        "doubt-busy")


def suspects(base: Baseline, cfg: AnalysisConfig) -> bool:
    """Whether the pooled comparison leaves the step time in doubt: a suspected change,
    or a busy host (load can hide a change as well as fake one)."""
    return doubt(base, cfg).says == DOUBT


def needs_rounds(base: Baseline, cfg: AnalysisConfig) -> bool:
    """Whether interleaved rounds are run to settle the doubt (`suspects`)."""
    return suspects(base, cfg) and base.rounds > 0


def rounds_for(verdict: Verdict, base: Baseline, cfg: AnalysisConfig) -> bool:
    """Whether rounds run for a cell of `verdict`: a good cell's doubt, or a leak whose
    pooled steps read slower, so its slowdown is said only where rounds confirm it."""
    if verdict in GOOD:
        return needs_rounds(base, cfg)
    found = kind(verdict)
    return (found.cls == "bad" and found.figure == "memory" and base.rounds > 0
            and base.steps is not None and base.steps.direction == "slower")


def pooled_text(steps: StepComparison, label: str) -> str:
    """What the pooled step-time test said, for reasons and progress lines."""
    return f"steps {steps.ratio:.2f}x {label} pooled (p={steps.p_value:.2g})"


def _vs_baseline(base: Baseline, within: CellVerdict, cfg: AnalysisConfig) -> CellVerdict:
    """The same table with the baseline's figures added; a pooled change is only
    `suspected` until interleaved rounds confirm it."""
    label, steps, peaks = base.label, base.steps, base.peaks
    findings = list(within.findings)
    vs = VsBaseline(label, steps, base.cpu, peaks)
    if within.verdict not in GOOD:
        # A rule before the baseline's decided: add the comparison's figures, and a
        # slowdown the rounds confirmed (`rounds_for`).
        return _also_slower(within, vs, base.confirmation)
    asked = doubt(base, cfg)
    vs = dataclasses.replace(vs, rule=asked.id)
    worse: list[str] = []
    suspected = unsettled = ""
    if steps is not None and asked.says == DOUBT:
        pooled = pooled_text(steps, label)
        vs = dataclasses.replace(vs, direction=(
            "suspected " + steps.direction if steps.direction != "~" else "~"))
        conf = base.confirmation
        if conf is not None:
            # The rounds decide, whatever the pooled steps suspected.
            vs = dataclasses.replace(vs, confirmation=conf, direction=conf.direction)
            if conf.direction == "slower":
                worse.append(f"steps {conf.ratio:.2f}x {label}, {conf.reason}")
            findings.append(Finding("vs-baseline", f"vs {label}: {conf.reason}"))
            unsettled = unsettled_words(conf, cfg, base.rounds)
        elif steps.direction == "slower":
            suspected = f"{pooled}; not confirmed (rounds: 0)" + (
                f"; the host was busy (run-queue delay {base.busy:.0%} of the step time), "
                "which the pooled p-value does not count: load can fake a change"
                if busy_doubt(base, cfg) else "")
    if peaks is not None and first_of(PeakVerdictEvidence(
            cfg, peaks.direction, peaks.ratio), PEAK_VERDICT_RULES)[0].says == REGRESSION:
        worse.append(f"peak RSS {peaks.ratio:.2f}x {label}")
    before = within.facts if within.facts is not None else Facts()
    found = dataclasses.replace(before, regression="; ".join(worse), suspected=suspected,
                                unsettled=unsettled)
    rule, _ = first_rule(Evidence(within.memory, found))
    flags = [f.text for f in findings if f.flag]
    if rule.id == "regression":
        findings.append(Finding("regression", "regression"))
        reason = "; ".join([*worse, *flags])
    elif rule.id == "suspected":
        reason = "; ".join([suspected, *flags])
    elif rule.id == "unsettled":
        said = [f"undecided vs {label}: {unsettled}",
                pooled_text(steps, label) if steps is not None else "",
                base.confirmation.reason if base.confirmation else "", *flags]
        reason = "; ".join(x for x in said if x)
    else:
        # The within-run rule still decides: the comparison adds its figures only.
        return dataclasses.replace(within, findings=tuple(findings), vs_baseline=vs,
                                   facts=found)
    return dataclasses.replace(within, verdict=rule.verdict, reason=reason, rule=rule.id,
                               findings=tuple(findings), vs_baseline=vs, facts=found)


def _also_slower(within: CellVerdict, vs: VsBaseline, conf: Confirmation | None
                 ) -> CellVerdict:
    """A leaking cell with rounds run: a slowdown they confirmed is said beside the leak,
    whose rule still decides; rounds that confirmed nothing say nothing."""
    if conf is None:
        return dataclasses.replace(within, vs_baseline=vs)
    vs = dataclasses.replace(vs, confirmation=conf, direction=conf.direction)
    if not (conf.confirmed and conf.direction == "slower"):
        return dataclasses.replace(within, vs_baseline=vs)
    slower = f"steps {conf.ratio:.2f}x {vs.baseline}, {conf.reason}"
    also = f"also slower than {vs.baseline}: {slower}"
    found = dataclasses.replace(within.facts or Facts(), regression=slower)
    return dataclasses.replace(
        within, reason=f"{within.reason}; {also}", vs_baseline=vs, facts=found,
        findings=(*within.findings, Finding("vs-baseline", also)))


def live_run(decision: LiveDecision | None, series: Series) -> LiveRun | None:
    """The live decision: when the host decided vs how far the agent got before stopping."""
    if decision is None:
        return None
    calls_run = (series.end or {}).get("iterations")
    return LiveRun(**{f.name: getattr(decision, f.name)
                      for f in dataclasses.fields(decision)},
                   calls_to_decision=decision.iterations,
                   calls_run=calls_run if isinstance(calls_run, int) else series.measured)


def _with_live(within: CellVerdict, live: LiveRun, reason: str,
               budget: float | None = None) -> str:
    """The reason once the live decision is known (where the agent ran on past the look,
    the run's samples decide). `budget`: the budget set, for a longer rerun's words."""
    looked = "leak" if live.verdict == "leak" else "ok"
    if live.calls_run > live.calls_to_decision and looked != within.verdict:
        reason += (f"; at call {live.calls_to_decision} it read {looked}, and its "
                   f"{live.calls_run:,} calls say {within.verdict}")
    span = (f" after {live.seconds:.1f} s of its {live.budget:g} s budget"
            if live.budget > 0 and live.seconds > 0 else "")
    if span and budget and abs(live.budget - budget) > 1e-6 * budget:
        span = (f" after {live.seconds:.1f} s of a run again of {live.budget:g} s "
                f"({live.budget / budget:.2g}x its {budget:g} s budget)")
    return reason + (f"; decided live at call {live.calls_to_decision}{span}, stopped at "
                     f"call {live.calls_run}")


def gpu_findings(verdict: Verdict, series: Series, pre: tuple[str, str] | None,
                 found: tuple[str, str] | None, decided: bool) -> list[Finding]:
    """What the GPU precheck and CUDA signs add to the findings (`decided`: the sign made
    the verdict)."""
    out: list[Finding] = []
    if pre is not None:
        out.append(Finding("gpu-check", f"{pre[0]}: {pre[1]}"))
    if pre is not None and pre[0] == "unsupported":
        out.append(Finding("gpu-check", unsupported_evidence(verdict, series, found)))
    if found is not None and not decided:
        out.append(Finding("gpu-check", f"{found[0]}: {found[1]}"))
    return out


def framework_device(series: Series) -> str | None:
    """Where the scenario says its framework ran (`info()["device"]`), lower-cased."""
    info = (series.end or {}).get("info")
    device = info.get("device") if isinstance(info, dict) else None
    return str(device).lower() if device is not None else None


def unsupported_evidence(verdict: Verdict, series: Series,
                         found: tuple[str, str] | None) -> str:
    """What running an NVIDIA-unsupported image/GPU pair showed, as a finding's text."""
    device = framework_device(series)
    if found is not None:
        return f"unsupported pair, run to decide: {found[0]} from evidence ({found[1]})"
    if verdict == "timeout":
        return ("unsupported pair, run to decide: undecided: killed at the short deadline "
                "with no CUDA error in the log (PTX JIT compiling every kernel looks like "
                "this): run the cell alone with a longer timeout to tell")
    if verdict == "crash":
        return ("unsupported pair, run to decide: crash with no CUDA compatibility error "
                "in the log: the failure is not attributed to the GPU")
    if device is not None and device_kind(device) == "cpu":
        return (f"unsupported pair, run to decide: undecided: the framework ran on "
                f"{device}, not the GPU, so the run proves nothing about the GPU "
                f"({series.measured} iterations, no CUDA error in the log)")
    return (f"unsupported pair, run to decide: ran {series.measured} iterations on the GPU "
            "with no CUDA compatibility error: a real measurement")


def cell_flags(wants_gpu: bool, verdict: Verdict, series: Series) -> list[Finding]:
    """What a reader must not miss, said in the reason too: a GPU cell run on the CPU, the
    heap reading's notes."""
    out: list[Finding] = []
    device = framework_device(series)
    if (wants_gpu and device is not None and device_kind(device) == "cpu"
            and verdict != "not-applicable"):
        out.append(Finding("no-gpu", f"no-gpu: a GPU cell, but the framework saw no GPU "
                                     f"and ran on {device}: measured on the CPU"))
    out.extend(Finding("heap-note", note) for note in series.notes)
    return out
