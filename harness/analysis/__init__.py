"""Verdicts from series: memory.py (within a run), baseline.py (between cells), decision.py.

This package's namespace holds the configuration, so that the spec imports it without
pulling in the runtimes, and the deciding functions the stages call (`analysis.decide`,
`analysis.LiveDecider`, ...): a sweep's stages import this package, and NumPy loads with
those functions only when the first is asked for, once the first container runs (the
prefetch thread, `sweeping.orchestrator.prefetch_analysis`, imports them meanwhile). The stages
reach the analysis's NumPy only through here (the series' arrays through
`protocol.series`' one import); every module of this package imports at its top.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from harness.thresholds import AnalysisConfig

if TYPE_CHECKING:
    from harness.analysis.baseline import (
        baseline_facts,
        decide_rounds,
        judged,
        settled,
        unchanged_because,
    )
    from harness.analysis.decision import CellFacts, decide, needs_rounds, pooled_text, rounds_for
    from harness.analysis.sequential import LiveDecider, watch_file
    from harness.analysis.stepreading import busy_share, run_stat, sm_clocks

# Name -> the module of this package that defines it (PEP 562: loaded on first use).
_LAZY = {
    "busy_share": "stepreading", "run_stat": "stepreading", "sm_clocks": "stepreading",
    "CellFacts": "decision", "decide": "decision", "needs_rounds": "decision",
    "pooled_text": "decision", "rounds_for": "decision",
    "baseline_facts": "baseline", "unchanged_because": "baseline",
    "decide_rounds": "baseline", "judged": "baseline", "settled": "baseline",
    "LiveDecider": "sequential", "watch_file": "sequential",
}

__all__ = ["AnalysisConfig", "CellFacts", "LiveDecider", "baseline_facts", "busy_share",
           "decide", "decide_rounds", "judged", "needs_rounds", "pooled_text", "rounds_for",
           "run_stat", "settled", "sm_clocks", "unchanged_because", "watch_file"]


if not TYPE_CHECKING:   # mypy reads the names above, and still refuses unknown ones
    def __getattr__(name: str) -> object:
        if name in _LAZY:
            # lazy: NumPy, with the deciding modules, once a sweep's first verdict is asked
            value = getattr(importlib.import_module(f"harness.analysis.{_LAZY[name]}"), name)
            globals()[name] = value
            return value
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
