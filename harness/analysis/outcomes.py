"""A run that ended before its last call keeps its evidence: what memory and step time
did before the timeout, the crash or the OOM kill.

"timeout after rss grew +1.00 GiB in 3 s, +6.0 KiB/call": the reason says it, whatever
the verdict. A leak that ends in a timeout is a finding about the image: its verdict is
`leak` (with the timeout said), so the row names it first bad; a crash or an OOM kill
stays what it is (both are already findings), with what memory did before it.
"""

from __future__ import annotations

from harness.analysis.kinds import Verdict
from harness.analysis.memory import MemoryReading
from harness.analysis.records import Finding
from harness.analysis.trends import StepTrend, kib
from harness.protocol.series import Series

# Memory readings a crash's reason adds its evidence for (a timeout's and an OOM kill's
# always say it: memory is what they are about).
GREW_BEFORE = ("leak", "filling", "plateau")
# The sources said for a run that ended early, where none leaks: the first read.
SAID = ("rss", "uss", "heap", "gpu", "fw")


def size(n: float) -> str:
    """Bytes as "+1.00 GiB", "+300 KiB", "+12.5 MiB"."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if abs(n) >= scale:
            return f"{n / scale:+.2f} {unit}"
    return f"{n / 1024:+.0f} KiB"


def before_the_end(mem: MemoryReading, series: Series) -> str:
    """What memory did before the run ended: "rss grew +1.00 GiB in 3 s, +6.0 KiB/call";
    "no memory readings" without one; a source with too few readings is "no readings"."""
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
    return f"{source} grew {size(grew)}{took}, {kib(t.slope)} KiB/call"


def steps_before(steps: StepTrend | None) -> str:
    """", steps 1.30x slower late than early" where the step times rose, else ""."""
    if steps is None or steps.insufficient or steps.ratio < 1.1:
        return ""
    return f", steps {steps.ratio:.2f}x slower late than early"


def ended_with(ended: tuple[Verdict, str], mem: MemoryReading, series: Series,
               steps: StepTrend | None = None
               ) -> tuple[Verdict, str, str | None, tuple[Finding, ...]]:
    """The verdict, reason, carrier and findings of a run that ended as `ended` says
    (crash, oom, timeout, not-applicable), with the evidence it left: memory, and the
    step times where they rose."""
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
    return kind, f"{why}; {said}", None, (note,)
