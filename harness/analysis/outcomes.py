"""A run that ended before its last call keeps its evidence: what memory and step time did
before the timeout, crash or OOM kill, said in its reason. A leak that ends in a timeout
is `leak` (a finding about the image); how a run ended includes its GPU signs."""

from __future__ import annotations

import re

from harness.analysis.kinds import SELF_EXIT, Verdict
from harness.analysis.memory import MemoryReading
from harness.analysis.records import Finding, StepTrend, human_seconds, rate_text, signed_size
from harness.gpu.cuda import AFTER_RUN, NOT_APPLICABLE_TEXT
from harness.protocol.ingest import raised_at
from harness.protocol.series import Series
from harness.runtimes.base import RunOutcome

# Memory readings a crash's reason adds evidence for (timeouts and OOM kills always do).
GREW_BEFORE = ("leak", "filling", "plateau")
# The sources said for a run that ended early, where none leaks: the first read.
SAID = ("rss", "uss", "heap", "gpu", "fw")


def before_the_end(mem: MemoryReading, series: Series) -> str:
    """What memory did before the run ended: "rss grew +1.00 GiB in 3 s, +6.0 KiB/call",
    or "no memory readings"/"no readings"."""
    source = (mem.carrier or "").split("+")[-1] if mem.kind == "leak" else None
    if source not in mem.memory:
        source = next((s for s in SAID if s in mem.memory), None)
    if source is None:
        return "no memory readings"
    t = mem.memory[source]
    if t.kind == "insufficient":
        return f"{source} no readings to decide ({t.n})"
    times = [float(s["t"]) for s in series.samples
             if s.get("phase") == "measure" and isinstance(s.get("t"), int | float)]
    took = f" in {max(times) - min(times):.0f} s" if len(times) > 1 else ""
    grew = t.end - t.start
    return f"{source} grew {signed_size(grew)}{took}, {rate_text(t.slope)}"


def steps_before(steps: StepTrend | None) -> str:
    """", steps 1.30x slower late than early" where the step times rose, else ""."""
    if steps is None or steps.insufficient or steps.ratio < 1.1:
        return ""
    return f", steps {steps.ratio:.2f}x slower late than early"


def ended_with(ended: tuple[Verdict, str], mem: MemoryReading, series: Series,
               steps: StepTrend | None = None
               ) -> tuple[Verdict, str, str | None, tuple[Finding, ...]]:
    """The verdict, reason, carrier and findings of a run that ended as `ended` says, with
    the evidence it left: memory, and the step times where they rose."""
    kind, why = ended
    if kind == "not-applicable":
        return kind, why, None, ()
    evidence = before_the_end(mem, series) + steps_before(steps)
    said = f"{kind} after {evidence}" if not evidence.startswith("no memory") else kind
    note = Finding("ended", f"{said} ({why})")
    if kind == "timeout" and mem.kind == "leak":
        return "leak", f"{said}: {mem.reason}", mem.carrier, (*mem.findings, note)
    if kind == "crash" and mem.kind not in GREW_BEFORE:
        return kind, why, None, (note,)     # a crash's message alone, memory unremarkable
    return kind, (f"{why}; {said}" if said != kind else why), None, (note,)


# A framework's own device out-of-memory: not OOM-killed, the framework raises.
GPU_OOM = re.compile(
    r"ResourceExhaustedError|OOM when allocating tensor|CUDA out of memory|"
    r"CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|torch\.cuda\.OutOfMemoryError|"
    r"failed to allocate [\d.]+[KMG]?i?B? .*from device: CUDA_ERROR_OUT_OF_MEMORY")
# The allocation report a framework prints with it (TF's BFC summary, PyTorch's sentence).
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


def how_it_ended(series: Series, outcome: RunOutcome) -> tuple[Verdict, str] | None:
    """How the run ended before its last call (`facts.ENDINGS`) and why; None: it ran out."""
    end = series.end
    if outcome.error:
        return "crash", outcome.error
    if outcome.timed_out:
        stuck = not_returned(series, outcome.duration_s)
        return "timeout", (f"{stuck}; " if stuck else "") + (
            f"killed at its deadline after {human_seconds(outcome.duration_s)}")
    text = outcome.log_tail + (str(end.get("error", {}).get("traceback", "")) if end else "")
    if outcome.exit_code in (137, -9):
        limit = outcome.mem_limit_bytes
        peak = outcome.details.get("host_max_usage")
        near = bool(limit and isinstance(peak, int) and peak >= 0.9 * limit)
        code = f"exit {outcome.exit_code}" + (", SIGKILL" if outcome.exit_code == -9 else "")
        if outcome.oom_killed or near:
            how = (str(outcome.details.get("oom") or "OOMKilled") if outcome.oom_killed
                   else f"cgroup peak {peak} near limit")
            said = f"peak {peak / 2**20:,.0f} MiB" if isinstance(peak, int) else ""
            return "oom", (f"{code}, {how}" + (f"; {said}" if said else "")
                           + (f" (limit {limit} bytes)" if limit else ""))
        return "crash", f"killed by SIGKILL from outside ({code}, not OOMKilled)"
    if GPU_OOM.search(text) and (outcome.exit_code not in (0, None) or (
            end is not None and end.get("status") == "error")):
        report = allocation_report(text)
        what = GPU_OOM.search(text).group(0)  # type: ignore[union-attr]
        return "oom", (f"out of device memory in the framework ({what})" +
                       (": " + " | ".join(report) if report else
                        "; the framework printed no allocation report"))
    if NOT_APPLICABLE_TEXT.search(text):
        return "not-applicable", NOT_APPLICABLE_TEXT.search(text).group(0)  # type: ignore[union-attr]
    if end is not None and end.get("status") == "error" and \
            (end.get("error") or {}).get("type") == "CallTimeout":
        err = end["error"]
        where = raised_at(str(err.get("traceback", "")))
        return "timeout", (f"{str(err.get('message', ''))[:300]}"
                           + (f", waiting at {where}" if where else ""))
    if end is not None and end.get("status") == "error":
        err = end.get("error") or {}
        where = raised_at(str(err.get("traceback", "")))
        return "crash", (f"{err.get('type', 'error')}: {str(err.get('message', ''))[:300]}"
                         + (f" (at {where})" if where else "") + in_call(err, series))
    if outcome.exit_code not in (0, None):
        last = [ln for ln in outcome.log_tail.splitlines() if ln.strip()][-1:]
        return "crash", (f"exit code {outcome.exit_code}" + in_call({}, series)
                         + (f": {last[0][:200]}" if last else ""))
    if end is None and outcome.exit_code == 0:
        return "crash", ("exit code 0" + in_call({}, series)
                         + " without an end record: " + SELF_EXIT)
    if end is None:
        return "crash", "the agent ended without an end record"
    return None


def _calls_and_times(series: Series) -> list[tuple[int, float, str]]:
    return [(int(s["i"]), float(s["t"]), str(s.get("phase", ""))) for s in series.samples
            if isinstance(s.get("i"), int) and isinstance(s.get("t"), int | float)]


PHASE_WORDS = {"warmup": "warm-up", "measure": "measured phase", "setup": "setup",
               "import": "import"}


def in_call(err: dict[str, object], series: Series) -> str:
    """" in call 14 (measured phase)": the call a run failed in, by the agent's error; for a
    killed run, " after call 420 (...)", the last call counted ("" before any)."""
    call, phase = err.get("call"), err.get("phase")
    if err and not isinstance(call, int):
        return ""       # an agent that did not say (an older one, or not in a call)
    if not isinstance(call, int):
        seen = _calls_and_times(series)
        if not seen:
            return ""
        i, _, phase = seen[-1]
        if phase not in ("warmup", "measure"):
            return f" in {PHASE_WORDS.get(str(phase), phase)}" if phase else ""
        # Samples come every few calls: it ended somewhere after the last one counted.
        return f" after call {i:,} ({PHASE_WORDS[phase]})"
    said = PHASE_WORDS.get(str(phase), "") if phase else ""
    return f" in call {call:,}" + (f" ({said})" if said else "")


def not_returned(series: Series, duration_s: float) -> str:
    """"call 301 did not return after 14 s" where a run killed at its deadline was stuck in
    one call (the sampler runs on during a call); "" where it was not."""
    seen = _calls_and_times(series)
    if not seen:
        return ""
    last, _, phase = seen[-1]
    since = min(t for i, t, _ in seen if i == last)
    stuck = max(duration_s, seen[-1][1]) - since if duration_s else seen[-1][1] - since
    if phase not in ("warmup", "measure") or stuck < 1.0:
        return ""
    return f"call {last + 1:,} ({PHASE_WORDS[phase]}) did not return after {stuck:.0f} s"


def host_took(series: Series) -> tuple[float, float] | None:
    """(wall seconds, the cell's own seconds) its calls ran, from the step samples' `cell_s`
    (load and sampling excluded): how much of the wall time the host took. None without
    two such samples in a phase."""
    spans: dict[str, tuple[float, float, float, float]] = {}
    for s in series.samples:
        cell, t = s.get("cell_s"), s.get("t")
        if s.get("src") != "step" or not isinstance(cell, int | float) \
                or not isinstance(t, int | float):
            continue
        phase = str(s.get("phase", ""))
        first = spans.get(phase)
        spans[phase] = (first[0], first[1], t, cell) if first else (t, cell, t, cell)
    wall = sum(t1 - t0 for t0, _, t1, _ in spans.values())
    own = sum(c1 - c0 for _, c0, _, c1 in spans.values())
    return (wall, max(0.0, own)) if wall > 0 else None


def host_stretched(series: Series) -> tuple[float, float] | None:
    """(wall seconds, the run's own seconds) of its measured phase, the agent's readings
    counted as the run's: what the host's other work took of it, and nothing else.
    `host_took` leaves the readings out of the own time with the host's delay, and a
    leak's readings (a collection over every object it kept, before each heap reading)
    can take as long as its calls on a quiet host: the check's own cost, not the
    host's. From the end record's `phases.measure`, `cell_s` and the readings' own time
    (`sampling_own_s` and `times_s`: their wall time `sampling_s` less the waits for a
    CPU within them, which are the host's, a CPU quota's throttling among them; the wall
    time where a run wrote no own time); `host_took` where the run wrote none."""
    end = series.end or {}
    own, times = end.get("sampling_own_s"), end.get("times_s")
    wall, cell, sampling = ((end.get("phases") or {}).get("measure"), end.get("cell_s"),
                            own + times if isinstance(own, int | float)
                            and isinstance(times, int | float) else end.get("sampling_s"))
    if not (isinstance(wall, int | float) and isinstance(cell, int | float)
            and isinstance(sampling, int | float)) or wall <= 0:
        return host_took(series)
    return float(wall), min(float(wall), float(cell) + float(sampling))


# A run killed at its deadline while the host took at least this share of its calls' time,
# none stuck, measured the host (rule `timeout-busy`). A stuck call's time runs on the
# agent's clock whatever the load.
HOST_TOOK_SHARE = 0.5
STUCK_S = 1.0


def deadline_busy(series: Series, outcome: RunOutcome) -> str:
    """Why a run killed at its deadline was the host's doing, in words; "" where a call was
    in progress for `STUCK_S` at the last sample (a hang), or the host took under
    `HOST_TOOK_SHARE` of the time."""
    if not outcome.timed_out:
        return ""
    seen = _calls_and_times(series)
    took = host_took(series)
    if not seen or took is None:
        return ""
    last = seen[-1][0]
    if seen[-1][1] - min(t for i, t, _ in seen if i == last) >= STUCK_S:
        return ""
    wall, own = took
    if wall - own < HOST_TOOK_SHARE * wall:
        return ""
    return (f"the host took {wall - own:.1f} s of the {wall:.1f} s its calls ran (run-queue "
            f"delay and the agent's sampling; their own time {own:.1f} s), and no call was "
            f"stuck")


# A first step JIT-compiling every kernel from PTX takes minutes, not seconds.
JIT_MIN_FIRST_S = 30.0
JIT_MIN_RATIO = 100.0


def runtime_sign(series: Series, ended: RunOutcome) -> tuple[str, str] | None:
    """Run-time incompatibility with the GPU (PTX JIT, no kernel image) the run showed:
    (not-applicable | degraded | ..., what showed it), or None."""
    first = next((s["dt"][0] for s in series.samples if s.get("src") == "step"
                  and s.get("dt")), None)
    median = series.cols.median_step
    err = str(((series.end or {}).get("error") or {}).get("traceback", ""))
    return runtime_incompatibility(first, median, ended.log_tail + err)


def runtime_incompatibility(first_step_s: float | None, median_step_s: float | None,
                            log_text: str = "", baseline_first_s: float | None = None
                            ) -> tuple[str, str] | None:
    """Incompatibility seen while running, when the image's labels did not say.

    The logs decide first; else a first iteration of minutes and hundreds of times the
    median step means a PTX JIT. `baseline_first_s` (the same image on another GPU)
    sharpens that. Returns (verdict, reason) or None.
    """
    for sign, pattern in AFTER_RUN:
        if pattern.search(log_text):
            return (sign.kind, sign.why)
    if first_step_s is None or not median_step_s or median_step_s <= 0:
        return None
    ratio = first_step_s / median_step_s
    slow_vs_other_gpu = (baseline_first_s is not None and first_step_s > 10 * baseline_first_s
                         and first_step_s > JIT_MIN_FIRST_S / 3)
    if (first_step_s >= JIT_MIN_FIRST_S and ratio >= JIT_MIN_RATIO) or slow_vs_other_gpu:
        return ("degraded", f"PTX JIT likely: the first iteration took {first_step_s:.0f} s, "
                f"{ratio:.0f}x the median step")
    return None
