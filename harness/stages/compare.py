"""Stage: compare a cell with its baseline. Pure: nothing runs and nothing is written
here. The comparison returns the cell's result, decided, or the rounds it needs first
(`context.RoundsPlan`), which the way runs (`confirm.run_rounds`; `--reanalyze` recalls
the recorded ones) and hands to `decide.with_rounds`. A sweep's row and a saved run
(`api.saved`) compare a measured cell here (`against_row`); they and `--reanalyze` all
compare through `against_baseline`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from harness import analysis
from harness.analysis.kinds import GOOD
from harness.matrixfile.model import Cell
from harness.protocol.series import Series
from harness.result.model import CellResult
from harness.stages.context import RoundsPlan, Runs
from harness.stages.decide import with_comparison

if TYPE_CHECKING:
    from harness.analysis.decision import CellVerdict
    from harness.stages.context import Measured
    from harness.thresholds import AnalysisConfig

MAX_CALLS = 1000   # the most calls a good cell's round runs (`confirm.round_cell`) ...
# ... but each cell's round runs at least this many seconds of its own steps, as pyperf
# calibrates its loops (`least_calls`): 1,000 calls of a 0.3 us step are 0.3 ms, and
# the 8 us baseline of a step 240x slower in the next release read 10 us in rounds of
# 1,000 calls (192x) where it runs at 7.9 us.
ROUND_S = 0.1
MOST_LEAST = 1_000_000   # ... and at most this many for it (a step of 0.1 us: 0.1 s)


def least_calls(step_s: float | None) -> int:
    """The calls that hold `ROUND_S` seconds of a step of `step_s` (0 where unknown)."""
    if not step_s or step_s <= 0:
        return 0
    return min(MOST_LEAST, math.ceil(ROUND_S / step_s))


def round_length(cell: Cell, measured: int, step_s: list[float | None]) -> int:
    """The calls that set the confirmation rounds' length (`confirm.round_cell` runs
    half of them): the suspect's measured calls, and for a budgeted cell no more than
    its budget holds at the slower of the two cells' step times, so that each round's
    run takes about half the budget (a slow step's budgeted run goes past its budget
    to its least calls; rounds of half that would take minutes)."""
    budget = cell.settings.run_budget
    slowest = max((s for s in step_s if s), default=0.0)
    if budget is None or slowest <= 0:
        return measured
    return min(measured, int(budget / slowest))


def against_baseline(cfg: AnalysisConfig, res: CellResult, within: CellVerdict,
                     base_series: Series, series: Series, label: str, rounds: int,
                     runs: Runs | None = None) -> CellResult | RoundsPlan:
    """`res` (within-run verdict `within`, samples `series`) against a baseline's
    samples: the pooled comparison (`analysis.baseline.baseline_facts`) and the verdict
    from the one table, or, where the pooled comparison leaves a doubt (a good cell's,
    or a leak whose steps read slower: `rounds_for`), the rounds that must settle it."""
    facts = analysis.baseline_facts(cfg, base_series, series, label, rounds,
                                    good=res.verdict in GOOD)
    if facts.steps is not None and analysis.rounds_for(res.verdict, facts, cfg):
        return RoundsPlan(res, within, facts, label, runs,
                          MAX_CALLS if res.verdict in GOOD else None,
                          (least_calls(base_series.cols.own_step),
                           least_calls(res.summary.median_step_s)))
    return with_comparison(cfg, res, within, facts)


def against_row(cfg: AnalysisConfig, cell: Cell, measured: Measured, base: Cell | Series,
                base_result: CellResult, base_series: Series, label: str
                ) -> CellResult | RoundsPlan:
    """A measured cell against its baseline's run (its result and samples in hand):
    `against_baseline`, with rounds that run the cell again beside `base`: a row's
    baseline cell, run again too, or a saved run's samples (`api.saved`), read again.
    The rounds' length is the cell's measured calls, for a budgeted cell no more than its
    budget holds at the slower of the two step times (`round_length`)."""
    res = measured.result
    calls = round_length(cell, len(measured.series.cols.steps),
                         [r.summary.median_step_s for r in (res, base_result)])
    runs = Runs(cell, base, calls, measured.home, measured.info)
    return against_baseline(cfg, res, measured.verdict, base_series, measured.series,
                            label, cell.settings.rounds, runs)
