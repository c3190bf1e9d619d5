"""Stage: decide a compared cell. Pure: its verdict from the one table
(`analysis.decide`) over the pooled comparison with its baseline and, where the
comparison planned rounds (`context.RoundsPlan`), what they found (run by
`confirm.run_rounds`, or recalled by `--reanalyze`)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from harness import analysis
from harness.result.model import CellResult

if TYPE_CHECKING:
    from harness.analysis.decision import CellVerdict
    from harness.analysis.records import Baseline, Confirmation
    from harness.stages.context import RoundsPlan
    from harness.thresholds import AnalysisConfig


def with_comparison(cfg: AnalysisConfig, res: CellResult, within: CellVerdict,
            facts: Baseline | None) -> CellResult:
    """`res` with the verdict the table gives its within-run verdict beside `facts` (the
    comparison with its baseline; None: none could be made)."""
    return with_verdict(res, analysis.decide(analysis.CellFacts(cfg, baseline=facts,
                                                                within=within)))


def with_rounds(cfg: AnalysisConfig, plan: RoundsPlan, found: Confirmation | None
                ) -> CellResult:
    """The planned comparison decided with what its rounds found (None: none were run
    or recorded)."""
    return with_comparison(cfg, plan.res, plan.within,
                   dataclasses.replace(plan.pooled, confirmation=found))


def with_verdict(res: CellResult, verdict: CellVerdict) -> CellResult:
    """`res` with the verdict and every number behind it taken from `verdict` (each
    field the two share: a field added to both is carried without a change here)."""
    mine = {f.name for f in dataclasses.fields(CellResult)}
    given = {f.name: getattr(verdict, f.name) for f in dataclasses.fields(verdict)
             if f.name in mine}
    for name, value in given.items():
        if isinstance(value, list):
            given[name] = tuple(value)
        elif isinstance(value, dict):
            given[name] = dict(value)
    return dataclasses.replace(res, **given)
