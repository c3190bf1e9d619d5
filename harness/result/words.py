"""A cell's result in words: the key numbers every report and answer shows."""

from __future__ import annotations

import math

from harness.analysis.facts import device_kind
from harness.analysis.kinds import BAD, GOOD, KINDS, SLOWDOWN, TIMED
from harness.analysis.records import (
    Confirmation,
    StepTrend,
    human_seconds,
    missed_text,
    rate_text,
    rate_words,
)
from harness.analysis.rules import shown
from harness.result.model import CellResult


def cell_numbers(res: CellResult) -> str:
    """Key numbers of a cell, each saying what it is, what made its verdict first (its
    kind's `figure`): the late/early step ratio of a slowdown, the ratios against the
    row's baseline of a regression, else growth per call of the deciding source; then
    median time per call."""
    lead_with = KINDS[res.verdict].figure
    memory: list[str] = []
    grown = carrier_words(res)
    if grown is not None and lead_with != "steps":
        memory.append(grown)
        missed = missed_words(res)
        if missed:
            memory.append(missed)
    step = res.summary.median_step_s
    # Beside the rounds' own step times (`baseline_numbers`), the cell's run's median is
    # said to be one run's: it ran alone, at another time, its waits for a CPU in it
    # (953 µs beside 4.42 ms read as "1.47x", the rounds' ratio net of those waits).
    own = " in its own run" if rounds_steps(res) is not None else ""
    per_call = [f"{human_seconds(step)}/call{own}"] if step is not None else []
    lead: list[str] = []
    if res.facts is not None and res.facts.runaway:
        lead.append("memory past the safety stop's limit")
    if lead_with == "steps" and res.steps is not None:
        lead.append(f"late steps {res.steps.ratio:.2f}x early")
    slowed = also_slowed(res)
    if slowed is not None:     # a confirmed slowdown within the run is never hidden
        memory.append(f"late steps {slowed.ratio:.2f}x early")
    versus = baseline_numbers(res)
    if lead_with == "baseline":
        return ", ".join([*versus, *lead, *memory, *per_call])
    return ", ".join([*lead, *memory, *per_call, *versus])


def carrier_words(res: CellResult) -> str | None:
    """The deciding carrier's growth per call: "gpu +1024.0 KiB/call" (None without a
    memory source)."""
    source = res.deciding_source
    if source is None:
        return None
    trend = res.memory[source]
    # The carrier's name as the reason says it ("uss+rss", whose figure is USS's).
    carrier = res.deciding_carrier
    name = shown(carrier if carrier and carrier.split("+")[0] == source else source)
    if trend.kind == "insufficient":
        return f"{name} no readings"     # too few to fit: never "+0.0"
    if KINDS[res.verdict].figure == "memory" and res.verdict in BAD:
        return f"{name} {rate_words(trend.slope)}"   # never "+0.0 KiB/call"
    return f"{name} {rate_text(trend.slope)}"


def missed_words(res: CellResult) -> str:
    """An `ok` or `plateau` cell's bound: "no leak above 40 B/call in 1,000 calls" (the
    smallest steady leak its run could have missed; "" for other kinds or old results)."""
    rate = missed_rate(res)
    return missed_text(rate, res.summary.iterations) if rate is not None else ""


def missed_rate(res: CellResult) -> float | None:
    """`missed_words`' bound in bytes per call (None for other kinds or old results)."""
    if res.verdict not in GOOD:
        return None
    rates = [r for s, t in res.memory.items() if s in ("heap", "uss", "rss")
             and (r := t.missed) is not None and math.isfinite(r)]
    return min(rates) if rates else None


def also_slowed(res: CellResult) -> StepTrend | None:
    """The cell's own step trend where it is bad for another reason (a leak) and its
    steps slowed down within its run too (its findings have the slowdown): the seed's
    symptom, every call slower as memory grows, said beside the verdict."""
    if res.verdict == SLOWDOWN or res.verdict not in BAD or res.steps is None:
        return None
    if not res.steps.slowdown or not any(f.kind == SLOWDOWN for f in res.findings):
        return None
    return res.steps


def also_slower(res: CellResult) -> Confirmation | None:
    """The rounds that confirmed a cell bad for another reason (a leak) slower than its
    row's baseline too, said beside its verdict (None: no rounds ran, or they confirmed
    no slowdown; a pooled ratio alone is never said beside a leak)."""
    vs = res.vs_baseline
    conf = vs.confirmation if vs is not None else None
    if res.verdict not in BAD or res.verdict in TIMED or conf is None:
        return None
    return conf if conf.confirmed and conf.direction == "slower" else None


def baseline_numbers(res: CellResult) -> list[str]:
    """The ratios against the row's baseline, each with its interval, and marked
    unconfirmed where no interleaved rounds confirmed it (left out beside a bad
    verdict)."""
    vs = res.vs_baseline
    if vs is None:
        return []
    parts: list[str] = []
    conf, steps, peak = vs.confirmation, vs.steps, vs.peak_rss
    direction = vs.said_direction
    if conf is not None and direction not in (None, "~"):
        steps_in = rounds_steps(res)
        said = (f": {human_seconds(steps_in[0])} -> {human_seconds(steps_in[1])}/call"
                if steps_in is not None else "")
        parts.append(f"time {conf.interval()} baseline ({direction} in "
                     f"{len(conf.decided_by)} interleaved rounds{said})")
    elif steps is not None and direction not in (None, "~") and (
            res.verdict not in BAD or KINDS[res.verdict].figure == "baseline"):
        # A pooled comparison alone: thousands of autocorrelated steps make any drift
        # look certain, so it is never stated as found, nor shown beside a bad verdict
        # about something else (a leak), where it would read as a finding.
        parts.append(f"time {steps.ratio:.2f}x baseline (pooled, p={steps.p_value:.2g}; "
                     "unconfirmed)")
    if peak is not None and peak.direction != "~":
        parts.append(f"peak RSS {peak.ratio:.2f}x baseline")
    return parts


def rounds_steps(res: CellResult) -> tuple[float, float] | None:
    """(baseline, this cell) step time per call in the interleaved rounds that decided a
    change in time against the baseline: the geometric means of the rounds' step times
    (each net of its run-queue delay, at the round's one CPU speed), whose ratio is the
    rounds' ratio; None where no rounds decided one."""
    vs = res.vs_baseline
    conf = vs.confirmation if vs is not None else None
    if conf is None or vs is None or vs.said_direction in (None, "~"):
        return None
    used = [r for r in conf.rounds if r.index in conf.decided_by and r.base_s > 0
            and r.other_s > 0]
    if not used:
        return None
    return (math.exp(sum(math.log(r.base_s) for r in used) / len(used)),
            math.exp(sum(math.log(r.other_s) for r in used) / len(used)))


def ran_on_cpu(res: CellResult) -> bool:
    """A GPU cell whose framework said it ran on the CPU (its `no-gpu` finding: a CPU
    build of TensorFlow on a GPU host): its verdict is about the CPU, never the GPU.
    The device its end record names is read again (`device_kind`): an older harness
    flagged PyTorch's "cuda" so too."""
    info = res.end.info or {}
    device = info.get("device")
    return (device is not None and device_kind(str(device)) == "cpu"
            and any(f.kind == "no-gpu" for f in res.findings))


def cell_text(res: CellResult, numbers: str | None = None) -> str:
    """'leak: heap +5.9 KiB/call, 15.9 µs/call, peak RSS 1.12x baseline'; 'ok (ran on
    CPU): ...' for a GPU cell measured on the CPU. `numbers`: its `cell_numbers`, where
    the caller has them."""
    numbers = cell_numbers(res) if numbers is None else numbers
    verdict = f"{res.verdict} (ran on CPU)" if ran_on_cpu(res) else str(res.verdict)
    return f"{verdict}: {numbers}" if numbers else verdict
