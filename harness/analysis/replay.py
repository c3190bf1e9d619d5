"""The early-stop decision replayed over a recorded series.

The sweep feeds a `LiveDecider` the agent's records as they arrive (`sequential.
watch_file`); a recorded `samples.jsonl` holds the same records in the same order, so
feeding them again gives the decision today's decider takes on that run. Used to decide
a recorded sweep again (`harness report DIR --reanalyze`) and by the benchmarks that
replay real runs.
"""

from __future__ import annotations

from harness.analysis.sequential import LiveDecider
from harness.analysis.trends import LiveDecision
from harness.protocol.ingest import Record
from harness.protocol.series import Series
from harness.thresholds import AnalysisConfig

__all__ = ["replay_live"]


def live_decider(cfg: AnalysisConfig, min_iterations: int, max_iterations: int
                 ) -> LiveDecider:
    """The decider a sweep watches an early-stop cell with.

    Raises:
        ValueError: the bounds or thresholds are out of range.
    """
    return LiveDecider(cfg, min_iterations, max_iterations)


def replay_live(cfg: AnalysisConfig, series: Series, min_iterations: int,
                max_iterations: int) -> LiveDecision | None:
    """The decision the live decider reaches on `series`, fed in file order; None when
    it reaches none (or the bounds are not ones a decider takes)."""
    try:
        decider = live_decider(cfg, min_iterations, max_iterations)
    except ValueError:
        return None
    records = [Record("header", 0, series.header)] if series.header is not None else []
    records += [Record("sample", 0, s) for s in series.samples]
    if series.end is not None:
        records.append(Record("end", 0, series.end))
    for record in records:
        if (found := decider.feed(record)) is not None:
            return found
    return None
