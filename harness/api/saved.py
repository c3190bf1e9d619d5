"""A cell against a saved run of an earlier version of its code (the pytest plugin's
`--harness-compare NAME`, `harness.api.check(..., baseline=...)`).

The same comparison as a sweep row's (`sweeping.settle.against_row`): the pooled
step times, peaks and CPU times, then, where they leave a doubt (a suspected change, a
busy host), the rounds it plans, run as a row's are (`sweeping.settle.run_plan`:
`sweeping.settle.run_rounds`), and the verdict from the one table.

What cannot be the same: a sweep's rounds run baseline and suspect alternately
(B S B S), so drift of the host hits both alike. A saved run's code is gone (it was
another commit), so it cannot run again: here each round runs the current cell afresh
(shorter, as `sweeping.settle.round_cell` makes it) and compares its statistic with the
saved run's (`analysis.stepreading.run_stat`, both put at one CPU speed by the agent's
canary loop: `speed_scaled`), and `analysis.baseline.decide_rounds` decides over the
rounds, as it does in a sweep (every usable round must agree, and the interval clear
`min_ratio`). A change that came from a burst of load in the first run does not come
back in its rounds; a host that is slower throughout than when the run was saved (a
loaded CI machine, another CPU) is corrected only as far as the canary sees it: save
and compare on the same machine.
"""

from __future__ import annotations

from harness.matrixfile.model import Cell
from harness.protocol.series import Series
from harness.result.model import CellResult
from harness.sweeping.context import Context, Measured
from harness.sweeping.settle import against_row, run_plan


def against_saved(ctx: Context, cell: Cell, measured: Measured, saved: CellResult,
                  saved_series: Series, label: str) -> CellResult:
    """`measured` (a run of `cell`) against the saved run `saved`, its verdict decided
    with the comparison; nothing is written."""
    return run_plan(ctx, against_row(ctx.cfg, cell, measured, saved_series, saved,
                                     saved_series, label))
