"""What `harness explain` attributes a verdict for (`kinds_for`), and where its runs
go (`EXPLAIN_DIR`). Which pairs a row's first bad and last good cell make is
`answers.pairs`; the where records the attributed runs left, read back, are
`answers.explained`. The runs themselves are a plan over the stages:
`harness.explain.plan`.
"""

from __future__ import annotations

from harness.analysis.kinds import MEMORY, TIMED, kind
from harness.result.model import CellResult

EXPLAIN_DIR = "explain"


def kinds_for(result: CellResult) -> tuple[str, ...]:
    """The agent's --attribute kinds for the cell's verdict (`Kind.attribute`), but the
    memory kinds of a verdict about time whose memory is not bad (no peak above the
    baseline's): a site is named for the quantity that is bad. A regression of step time
    alone was attributed with tracemalloc too, which named "heap: +0.2 KiB/call" where
    the sweep read 0.25 B/call (issue 63), and made the step 150x slower for its stacks."""
    kinds = kind(result.verdict).attribute
    if result.verdict in TIMED and not larger(result):
        return tuple(k for k in kinds if k not in MEMORY)
    return kinds


def larger(result: CellResult) -> bool:
    """The cell's peak memory read higher than its baseline's."""
    vs = result.vs_baseline
    return vs is not None and vs.peak_rss is not None and vs.peak_rss.direction == "higher"
