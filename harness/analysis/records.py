"""The analysis's results as plain frozen records: what a verdict rests on, and what
it finds (`Finding`, typed by `FindingKind`), defined here.

The records themselves live by concern: what one run shows over its own course in
`trends` (`MemoryTrend`, `StepTrend`, `LiveDecision`, `LiveRun`, `Explained`, `GpuTime`),
a cell against its baseline in `vsbaseline` (`StepComparison`, `PeakComparison`,
`Round`, `Confirmation`, `VsBaseline`), their base in `recordbase`; every name is read
from here too. None of them needs NumPy or SciPy, so the result model, the reports and
search load them cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from harness.analysis.recordbase import Record
from harness.analysis.trends import (
    CLOCK_DROP,
    CLOCK_REASONS,
    Explained,
    GpuTime,
    Kind,
    LiveDecision,
    LiveRun,
    MemoryKind,
    MemoryTrend,
    StepTrend,
)
from harness.analysis.vsbaseline import (
    Confirmation,
    Direction,
    PeakComparison,
    PeakDirection,
    Round,
    StepComparison,
    VsBaseline,
)

__all__ = ["CLOCK_DROP", "CLOCK_REASONS", "FLAG_KINDS", "Confirmation", "Direction",
           "Explained", "Finding", "FindingKind", "GpuTime", "Kind", "LiveDecision",
           "LiveRun", "MemoryKind", "MemoryTrend", "PeakComparison", "PeakDirection",
           "Record", "Round", "StepComparison", "StepTrend", "VsBaseline"]


FindingKind = Literal[
    "leak",          # a memory source grows: the carrier, or another source beside it
    "slowdown",      # late steps slower than early ones
    "plateau",       # memory grew, then flattened
    "regression",    # worse than the row's baseline
    "busy-host",     # contention explains a slowdown
    "vs-baseline",   # what the confirmation rounds found
    "no-gpu",        # a GPU cell whose framework ran on the CPU (a flag: said in reasons)
    "heap-note",     # how the heap was read (mallinfo's 4 GiB wrap: a flag)
    "gpu-check",     # the GPU precheck or run-time CUDA evidence (unsupported, degraded, ...)
    "ended",         # how a cut-short run ended, with what memory did before it
    "note",          # anything else a reader should see
]
# Kinds a row comparison repeats in its reason: a reader must not miss them.
FLAG_KINDS: frozenset[str] = frozenset({"no-gpu", "heap-note"})


@dataclass(frozen=True, slots=True)
class Finding(Record):
    """One thing the analysis found about a cell, typed by `kind`; `text` is what a
    reader sees (the reason quotes the flags)."""

    kind: FindingKind
    text: str

    def __str__(self) -> str:
        return self.text

    @property
    def flag(self) -> bool:
        return self.kind in FLAG_KINDS

    @classmethod
    def from_text(cls, text: str) -> Finding:
        """A finding as older result.json files stored it: bare text, kind by its words."""
        head = text.split(":", 1)[0].strip()
        kinds: dict[str, FindingKind] = {
            "leak": "leak", "slowdown": "slowdown", "plateau": "plateau",
            "regression": "regression", "busy host": "busy-host", "no-gpu": "no-gpu",
            "heap": "heap-note", "unsupported": "gpu-check", "degraded": "gpu-check",
            "not-applicable": "gpu-check"}
        if head.startswith("vs "):
            return cls("vs-baseline", text)
        if text.startswith("unsupported pair"):
            return cls("gpu-check", text)
        return cls(kinds.get(head, "note"), text)
