"""Issue 78 point 5: a cell whose memory grows is never `slowdown` alone. A native leak
that starts late read `slowdown within run (late steps 1.35x early ...)` and not a word
of memory while its RSS went from 35 to 112 MB; each call slower and memory growing is
the seeds' symptom. Where memory leaks, rule `leak` decides (the slowdown among its
findings); where it grows and is not decided yet, or is neither growing nor stable, the
slowdown's words say it too."""

from __future__ import annotations

import pytest

from harness.analysis.decision import RunReading, verdict_of
from harness.analysis.facts import Facts
from harness.analysis.memory import MemoryReading, Reading
from harness.analysis.records import MemoryKind, MemoryTrend, StepTrend
from harness.analysis.rules import Evidence, first_rule
from harness.protocol.series import Series

SLOWER = "late steps 1.35x early (p=0); CPU time per step 1.16x (CPU-bound)"
STEPS = StepTrend(4000, 1.6e-4, 1.4e-4, 1.9e-4, 1.35, 1e-20, True)


def trend(source: str, kind: MemoryKind, slope: float = 0.0) -> MemoryTrend:
    return MemoryTrend(source, 200, slope, slope - 5, slope + 5, slope * 1000, slope,
                       slope - 5, slope + 5, 3.5e7, 3.5e7 + slope * 1000,
                       3.5e7 + slope * 1000, kind, floor=65536.0)


def reading(kind: Reading, reason: str, memory: dict[str, MemoryTrend],
            facts: Facts) -> RunReading:
    mem = MemoryReading(kind, reason, "heap", memory, calls=4000, rule=kind)
    return RunReading(mem, Evidence(memory, facts), steps=STEPS)


@pytest.mark.parametrize(("kind", "reason"), [
    ("creep", "heap grows +40 B/call (CI +35..+45) without slowing, +0.16 MiB over 4,000 "
              "calls: under its 256 KiB floor, a small leak or a cache still filling"),
    ("unconfirmed", "rss grows +800 B/call but uss does not confirm it"),
    ("filling", "heap +3.05 MiB over 4,000 calls: a leak or a cache still filling"),
])
@pytest.mark.parametrize("facts", [Facts(slowdown=SLOWER),
                                   Facts(slowdown=SLOWER, once=SLOWER),
                                   Facts(slowdown=SLOWER, rising=8000)])
def test_a_slowdown_beside_growing_memory_says_the_memory_too(
        kind: Reading, reason: str, facts: Facts) -> None:
    memory = {"heap": trend("heap", "ambiguous", 40), "uss": trend("uss", "plateau", 80),
              "rss": trend("rss", "leak", 800)}
    got = verdict_of(reading(kind, reason, memory, facts), Series())
    assert got.rule in ("slowdown", "one-run", "rising"), got.rule
    assert SLOWER in got.reason
    assert f"and memory grows: {reason}" in got.reason, got.reason


@pytest.mark.parametrize("facts", [Facts(slowdown=SLOWER),
                                   Facts(slowdown=SLOWER, once=SLOWER),
                                   Facts(slowdown=SLOWER, rising=8000)])
def test_a_slowdown_beside_memory_neither_growing_nor_stable_says_it_is_undecided(
        facts: Facts) -> None:
    # A CI's list-keeping scenario, 2026-12-01: heap +34 B/call (CI +32..+35), its late
    # window +0..+33 (rule `unsure`), read "slowdown" and not a word of its memory
    memory = {"heap": trend("heap", "ambiguous", 34), "uss": trend("uss", "ambiguous", 32),
              "rss": trend("rss", "stable", 32)}
    got = verdict_of(reading("unsure", "heap neither clearly growing nor stable", memory,
                             facts), Series())
    assert got.rule in ("slowdown", "one-run", "rising"), got.rule
    assert SLOWER in got.reason
    assert "; and memory is undecided: heap neither clearly growing nor stable" in got.reason
    if got.rule == "slowdown":
        assert any(f.kind == "note" and "memory is undecided" in f.text
                   for f in got.findings), got.findings


def test_a_slowdown_beside_flat_memory_says_no_more() -> None:
    memory = {s: trend(s, "stable") for s in ("heap", "uss", "rss")}
    got = verdict_of(reading("ok", "memory stable", memory, Facts(slowdown=SLOWER)),
                     Series())
    assert got.rule == "slowdown" and got.reason == SLOWER


def test_a_leak_with_a_slowdown_is_a_leak_with_the_slowdown_among_its_findings() -> None:
    memory = {s: trend(s, "leak", 800) for s in ("heap", "uss", "rss")}
    rule, carrier = first_rule(Evidence(memory, Facts(slowdown=SLOWER)))
    assert (rule.id, carrier) == ("leak", "heap")
    got = verdict_of(reading("leak", "heap grows +800 B/call", memory,
                             Facts(slowdown=SLOWER)), Series())
    assert got.verdict == "leak" and any(f.kind == "slowdown" for f in got.findings)
