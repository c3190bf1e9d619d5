"""A cell against its row's baseline: the pooled comparison, gathered as facts.

The sweep (`harness.orchestrator.Sweep.compare`) and a re-analysis of a recorded sweep
(`harness.answers.reanalyze`) both call `baseline_facts`; the sweep then runs the
interleaved rounds where the facts leave a doubt, a re-analysis keeps the recorded
ones. `harness.analysis.decision.decide` sets the verdict from them.
"""

from __future__ import annotations

import dataclasses

from harness.analysis.contention import busy_share
from harness.analysis.decision import Baseline
from harness.analysis.pooled import compare_to_baseline
from harness.protocol.series import Series
from harness.thresholds import AnalysisConfig

__all__ = ["baseline_facts"]


def baseline_facts(cfg: AnalysisConfig, base: Series, series: Series, label: str,
                   rounds: int, *, good: bool) -> Baseline:
    """Pooled step times, peaks and CPU times of `series` against its baseline's, and
    (for a cell good within its run) how busy the host was for either.

    Args:
        label: The baseline image's label, as reasons name it.
        rounds: The confirmation rounds the cell's settings ask for.
        good: The cell's within-run verdict is good (only then do rounds matter).
    """
    steps, peaks = compare_to_baseline(base.step_times(), base.peak("rss"),
                                       series.step_times(), series.peak("rss"), cfg)
    cpu = None
    base_cpu, cell_cpu = base.cpu_times(), series.cpu_times()
    if base_cpu is not None and cell_cpu is not None:
        cpu, _ = compare_to_baseline(base_cpu, None, cell_cpu, None, cfg)
    facts = Baseline(label, steps, peaks, cpu, rounds=rounds)
    if good:
        busy = max(busy_share(base) or 0.0, busy_share(series) or 0.0)
        facts = dataclasses.replace(facts, busy=busy)
    return facts
