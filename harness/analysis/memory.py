"""The one decision of memory growth: what a cell's memory did, from its samples so far.
`memory_reading(series, cfg)` is a pure function of the samples seen so far, asked by
the live decider, the post-run verdict and `--reanalyze` alike; per source
`growth.trend_and_fill` is the one statistic, and here the sources become one reading
(which carrier leaks, a fill, a plateau or stable, and the leak the run could have
missed: `MemoryTrend.missed`). Why `garbage`: PyTorch's rfft on an H100 grew ~0.3
KiB/call of cyclic garbage (tests/data/h100/sweep-1123) that the oldest generation frees
in its own time; a run that ends before that collection would read it as a leak."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

from harness.analysis.facts import Facts
from harness.analysis.growth import (
    CREEP_MAX_S,
    FILL_RERUN,
    RUNS_NO_MORE,
    Fill,
    creep_rerun,
    trend_and_fill,
)
from harness.analysis.records import (
    Finding,
    MemoryTrend,
    missed_text,
    rate_words,
    size,
)
from harness.analysis.rules import (
    CARRIERS,
    GARBAGE,
    GARBAGE_RULES,
    PRIMARY,
    TOTAL_ONLY,
    WORKERS,
    CollectedEvidence,
    Evidence,
    first_of,
    leaking,
    memory_rule,
    shown,
)
from harness.protocol.series import TREND_NAMES, Series
from harness.thresholds import AnalysisConfig

# Sources that count exact bytes (the device's used memory, the framework allocator's
# bytes in use): no allocator noise, so fewer readings give a slope (5, where the
# others need `min_samples`): a device read every 10 calls is decided at 50.
EXACT = frozenset({"gpu", "fw"})
EXACT_MIN_SAMPLES = 5

Reading = Literal["leak", "filling", "insufficient", "creep", "unsure", "unconfirmed",
                  "plateau", "ok"]


@dataclass(frozen=True)
class MemoryReading:
    """What a cell's memory did over its samples so far (`memory_reading`).

    Attributes:
        kind: leak (a carrier leaks), filling (a leak a cache still filling could
            explain), insufficient (too few readings), unsure (the primary source
            neither grows nor is stable), unconfirmed (RSS grows, USS does not say so),
            plateau, ok.
        reason: The reading in words, with its figures.
        carrier: The source the reading is about.
        memory: Every source's trend.
        fill: The fill check behind `filling`.
        findings: The leak findings, one per leaking carrier; a plateau's.
        rerun: The calls an ambiguous cell's next run measures, where its reading says
            (a fill's, a creep's); None: twice this run.
    """

    kind: Reading
    reason: str
    carrier: str | None
    memory: dict[str, MemoryTrend]
    fill: Fill | None = None
    findings: tuple[Finding, ...] = ()
    cyclic: Finding | None = None      # the heap's growth was cyclic garbage (`garbage`)
    calls: int = 0                     # measured calls the samples span
    rule: str = ""                     # the id of the rule that decided (`rules.RULES`)
    filling: tuple[str, ...] = ()      # the sources a bounded fill still fits
    rerun: int | None = None

    @property
    def missed_said(self) -> str:
        """"no leak above 40 B/call in 1,000 calls" ("" when not known); where the
        worker processes' USS was read (`kids`), their own bound after it: "...; worker
        processes: no leak above 1.2 KiB/call"."""
        said = missed_text(self.missed, self.calls)
        kids = missed_text(self.memory["kids"].missed, None) if "kids" in self.memory else ""
        return "; ".join(s for s in (said, kids and f"worker processes: {kids}") if s)

    @property
    def missed(self) -> float:
        """The smallest steady leak (bytes/call) the run could have missed: a host leak
        grows every host source, so the most sensitive one's (NaN without one)."""
        rates = [r for s in PRIMARY if s in self.memory
                 and (r := self.memory[s].missed) is not None and math.isfinite(r)]
        return min(rates) if rates else math.nan


def risen(t: MemoryTrend) -> float:
    """What a source grew over the run: from its first readings to its highest, not the
    fitted slope times the calls, which a fill's many slow readings inflate (issue 49:
    "+420 MiB over 1,360 calls" where the heap rose 236 MiB and stopped); the slope's
    growth where it never rose above where it began."""
    rise = t.peak - t.start
    return rise if rise > 0 else t.growth


def leak_reason(found: list[tuple[str, MemoryTrend]], measured: int) -> str:
    """"gpu grows +1024.0 KiB/call (CI ..), +1.46 MiB over 1500 calls, never levelling
    off: a cache would hold more than 1.5 GiB; also fw +1024.0, heap +2.4 KiB/call": the
    size a cache still filling would need to explain it (issue 49)."""
    name, t = found[0]
    rate = rate_words(t.slope, t.slope_lo, t.slope_hi)
    grows = "workers grow" if name == WORKERS else f"{name} grows"
    # From its first readings to its last (medians of a few each), so that the total
    # agrees with the rate: a single high reading (the agent's own step times were in
    # the heap reading once) made "+8 B/call, +74.84 MiB over 424,930 calls" (issue 63).
    kept = t.end - t.start
    grew = kept if kept > 0 else risen(t)
    text = (f"{grows} {rate}, "
            f"{grew / 1024**2:+.2f} MiB over {measured:,} calls, never levelling off: a "
            f"cache would hold more than {size(grew)}")
    if len(found) > 1:
        text += "; also " + ", ".join(f"{shown(n)} {rate_words(o.slope)}" for n, o in found[1:])
    return text


def trends_and_fills(series: Series, cfg: AnalysisConfig
                     ) -> tuple[dict[str, MemoryTrend], dict[str, Fill]]:
    """Every memory source's trend, and the fill checks that turned a leak ambiguous
    (`growth.fill_check`), by source."""
    heap_cfg = dataclasses.replace(cfg, leak_floor_bytes=cfg.heap_floor_bytes)
    out: dict[str, MemoryTrend] = {}
    fills: dict[str, Fill] = {}
    pace = series.cols.pace
    creep_calls = CREEP_MAX_S / pace if pace else math.inf
    for key, name in TREND_NAMES.items():
        x, y = series.cols.memory[key]
        if len(x):
            out[name], fill = trend_and_fill(
                name, x, y, heap_cfg if name == "heap" else cfg,
                min(cfg.min_samples, EXACT_MIN_SAMPLES) if name in EXACT else None,
                per_call=name not in TOTAL_ONLY, creep_calls=creep_calls)
            if fill is not None:
                fills[name] = dataclasses.replace(
                    fill, growth=out[name].growth, calls=series.measured,
                    rerun=FILL_RERUN * max(1, series.measured))
    return out, fills


def memory_reading(series: Series, cfg: AnalysisConfig, again: bool = True,
                   collected: bool = True) -> MemoryReading:
    """The one decision of a cell's memory over `series`'s samples (so far).

    Args:
        again: An ambiguous cell runs again (its repeats are not spent), as a filling
            reading's reason says.
        collected: Apply the end record's `gc.collect()` reading (`garbage`), where the
            series has one (a live look's has none yet).
    """
    memory, fills = trends_and_fills(series, cfg)
    return reading_of(memory, fills, series, again, collected)


def reading_of(memory: dict[str, MemoryTrend], fills: dict[str, Fill], series: Series,
               again: bool = True, collected: bool = True) -> MemoryReading:
    """`memory_reading` from trends already made."""
    cyclic = garbage(series, memory["heap"]) if collected and "heap" in memory else None
    if cyclic is not None:
        memory = {**memory, "heap": dataclasses.replace(memory["heap"], kind="stable")}
        fills = {k: v for k, v in fills.items() if k != "heap"}
    measured = series.cols.calls

    def out(kind: Reading, reason: str, carrier: str | None, fill: Fill | None = None,
            findings: tuple[Finding, ...] = (), rerun: int | None = None) -> MemoryReading:
        return MemoryReading(kind, reason, carrier, memory, fill, findings, cyclic, measured,
                             rule.id, tuple(fills),
                             fill.rerun if fill is not None else rerun)

    ev = Evidence(memory, Facts(filling=tuple(fills)))
    rule, named = memory_rule(ev)
    if rule.id == "leak":
        found = leaking(memory)
        return out("leak", leak_reason(found, measured), named, findings=tuple(
            Finding("leak", f"leak: {shown(n)} {rate_words(t.slope)}") for n, t in found))
    if rule.id == "filling":
        fill = next(fills[p] for p in CARRIERS[named] if p in fills)
        return out("filling", f"{shown(named)} {fill.said(again)}", named, fill)
    if rule.id == "insufficient":
        if named == WORKERS:
            n = memory[named].n
            return out("insufficient", f"the worker processes' memory read {n} times: too "
                       "few to call them flat; a run that reads them more tells (running "
                       "it again)" if again else f"the worker processes' memory read {n} "
                       "times: too few to call them flat", named)
        return out("insufficient", "too few memory samples to decide",
                   None if named == "none" else named)
    if rule.id == "creep":
        t, calls = memory[named], creep_rerun(memory[named])
        then = (f"a run of {calls:,} calls or more tells: running it again" if again
                else f"a run of {calls:,} calls would tell {RUNS_NO_MORE}")
        return out("creep", f"{shown(named)} grows {t.slope:+,.0f} B/call (CI {t.slope_lo:+,.0f}.."
                   f"{t.slope_hi:+,.0f}) without slowing, {size(t.growth)} over "
                   f"{measured:,} calls: under its {size(t.floor)} floor, a small leak or "
                   f"a cache still filling; {then}", named, rerun=calls)
    if rule.id == "unsure":
        who = "the worker processes' memory" if named == WORKERS else named
        return out("unsure", f"{who} neither clearly growing nor stable", named)
    primary = ev.primary
    if rule.id == "unconfirmed":
        t = memory["rss"]
        return out("unconfirmed", f"rss grows {rate_words(t.slope)} but {primary} does "
                   "not confirm it", "rss")
    if rule.id == "plateau":
        t = memory[named]
        # The rise, not the fitted slope times the span: Theil-Sen all but ignores the
        # few readings where a cache filled, and "+0.00 MiB" would hide what it grew.
        grew = risen(t)
        return out("plateau", f"{shown(named)} grew {grew / 1024**2:+.2f} MiB then flattened",
                   named, findings=(Finding("plateau", "plateau"),))
    said = ("memory stable once collected (the heap's growth was cyclic garbage)"
            if cyclic is not None else "memory stable")
    return out("ok", said, primary)


def garbage(series: Series, heap: MemoryTrend) -> Finding | None:
    """A heap that grew like a leak but that one `gc.collect()` after the last call (the
    agent's `collected` end field) brought back within the floor: cyclic garbage that
    Python's oldest generation frees in its own time, not a leak. A leak keeps what it
    grew, collection or not. None when that is not so."""
    got = (series.end or {}).get("collected")
    before = after = None
    if isinstance(got, dict):
        before, after = got.get("heap"), got.get("heap_after")
    if not isinstance(before, int) or not isinstance(after, int):
        return None
    grew, kept = before - heap.start, after - heap.start
    rule, _ = first_of(CollectedEvidence(heap.kind, heap.creep, grew, kept, heap.floor),
                       GARBAGE_RULES)
    if rule.says != GARBAGE:
        return None
    return Finding("note", f"garbage: the heap grew {grew / 1024:+.0f} KiB; gc.collect() "
                   f"after the last call gave back {(before - after) / 1024:.0f} KiB, and "
                   f"it keeps {kept / 1024:+.0f} KiB: cyclic garbage, not a leak")
