"""The table of a memory source's kind (`TREND_RULES`) and of cyclic garbage
(`GARBAGE_RULES`): what `growth.trend_and_fill` and `memory.garbage` read of a source's
figures, decided here, in order, like the verdict's rules (`rules.RULES`) and a run's
course (`runrules`). docs/verdicts.md lists both tables (made by
`python -m harness.analysis.ruledocs docs/verdicts.md`); every threshold these rules
compare is read here, not in the modules that compute the figures."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.analysis.table import Rule
from harness.analysis.trends import MemoryTrend
from harness.thresholds import AnalysisConfig

if TYPE_CHECKING:   # a fit's type alone: the table loads without NumPy (a sweep's start)
    from harness.analysis.slopes import SlopeFit

NEAR_FLOOR_MULTIPLE = 2.0   # growth under this many floors ...
NEAR_FLOOR_DECAY = 0.9      # ... with the late slope under this share of the whole one
CREEP_MARGIN = 2.0          # a creep's next run: this many times the calls its floor needs
CREEP_MAX_CALLS = 1_000_000     # the most a budgeted run makes (matrixfile.BUDGET_CAP)


def per_call_rule(lo: float, growth: float, late: float, late_lo: float, slope: float,
                  cfg: AnalysisConfig, floor: float | None = None) -> bool:
    """The per-call rule over a slope's figures: its interval's lower bound `lo` above
    `floor` (`live_floor_bytes` by default), its growth past `live_min_growth_bytes`,
    and the late slope (interval above zero) keeping `live_decay_ratio` of the rate."""
    return (lo > (cfg.live_floor_bytes if floor is None else floor)
            and growth >= cfg.live_min_growth_bytes
            and late_lo > 0.0 and late >= cfg.live_decay_ratio * slope)


def steady_above(whole: SlopeFit, late: SlopeFit, span: float, cfg: AnalysisConfig) -> bool:
    """The per-call rule: the whole slope's interval lies wholly above the per-call
    floor (`live_floor_bytes`), the growth passes `live_min_growth_bytes`, and it does
    not slow down (the late slope keeps `live_decay_ratio` of the whole one, its
    interval above zero). Such growth is never `ok`, however small its total against
    the source's floor: it is a leak, or (`growth.fill_check`) a cache still filling."""
    return per_call_rule(whole.lo, whole.slope * span, late.slope, late.lo, whole.slope, cfg)


def steady_above_trend(t: MemoryTrend, cfg: AnalysisConfig) -> bool:
    """`steady_above` read back from a trend's own figures (what a reader can check)."""
    return per_call_rule(t.slope_lo, t.growth, t.late_slope, t.late_lo, t.slope, cfg)


def creeping(whole: SlopeFit, late: SlopeFit, span: float, floor: float,
             cfg: AnalysisConfig, most: float = math.inf) -> bool:
    """The per-call rule at `ok_floor_bytes` in place of `live_floor_bytes`: growth too
    small for either leak rule yet, but steady; not a leak until a run long enough for
    its growth to pass the source's floor says so (`growth.creep_rerun`), where one can,
    in at most `most` calls and `CREEP_MAX_CALLS`: a floor no such run would pass says
    the growth does not matter."""
    return per_call_rule(whole.lo, whole.slope * span, late.slope, late.lo, whole.slope,
                         cfg, cfg.ok_floor_bytes) \
        and CREEP_MARGIN * floor / whole.lo <= min(most, CREEP_MAX_CALLS)


@dataclass(frozen=True)
class TrendEvidence:
    """A source's figures (`growth.trend_and_fill`), as its kind's rules read them.

    Attributes:
        cfg: The thresholds.
        n: Readings after warm-up.
        least: The fewest readings a kind needs (`min_samples`; 5 for the GPU and the
            framework allocator).
        span: Calls between the first and last reading.
        whole, late: Theil-Sen slopes over the whole span and the late window (None
            before they are fitted: only `too-few` is asked then).
        growth: The whole slope times the span (bytes).
        rise: The last readings' median minus the first's (bytes).
        floor: The source's floor (bytes): the configured one, its noise band, its
            largest drawdown.
        per_call: The per-call rule applies (not RSS's or the cgroup's: pages move them).
        creep_calls: The most calls a creep's next run may ask.
    """

    cfg: AnalysisConfig
    n: int
    least: int
    span: float
    whole: SlopeFit | None = None
    late: SlopeFit | None = None
    growth: float = 0.0
    rise: float = 0.0
    floor: float = 0.0
    per_call: bool = True
    creep_calls: float = math.inf

    @property
    def fits(self) -> tuple[SlopeFit, SlopeFit]:
        assert self.whole is not None and self.late is not None, "fits asked before fitted"
        return self.whole, self.late

    @property
    def trending(self) -> bool:
        return self.fits[0].lo > 0.0 and self.growth > self.floor

    @property
    def kept_up(self) -> bool:
        """Still growing: the late slope's lower bound, kept up over the span, passes
        the floor (a creep, or one level shift late on, is not enough)."""
        return self.trending and self.fits[1].lo * self.span > self.floor

    @property
    def rose(self) -> bool:
        """It grew: a trend, or a rise between the first and last readings over the
        floor (a ratchet or a filled buffer, which a straight line fits badly)."""
        return self.trending or self.rise > self.floor


def _per_call(ev: TrendEvidence) -> str | None:
    whole, late = ev.fits
    return "per-call" if ev.per_call and steady_above(whole, late, ev.span, ev.cfg) else None


def _near_floor(ev: TrendEvidence) -> str | None:
    whole, late = ev.fits
    slowing = late.slope < NEAR_FLOOR_DECAY * whole.slope
    return "total" if ev.kept_up and slowing and \
        ev.growth < NEAR_FLOOR_MULTIPLE * ev.floor else None


def _stalled(ev: TrendEvidence) -> str | None:
    whole, late = ev.fits
    # Against the mean rate of rise as well: Theil-Sen all but ignores a few steps.
    rate = max(whole.slope, ev.rise / ev.span)
    stalled = late.hi < ev.cfg.stall_fraction * rate or late.hi * ev.span <= ev.floor
    return "late" if ev.rose and stalled else None


def _creep(ev: TrendEvidence) -> str | None:
    whole, late = ev.fits
    return "creep" if ev.per_call and creeping(whole, late, ev.span, ev.floor, ev.cfg,
                                               ev.creep_calls) else None


# Each rule's `says` is a memory kind (`trends.MemoryKind`), or "creep": ambiguous, and
# its next run asks the calls that pass its floor (`growth.creep_rerun`).
TREND_RULES: tuple[Rule[TrendEvidence], ...] = (
    Rule("too-few", "insufficient", "fewer readings than `min_samples` (5 for the GPU and "
         "the framework allocator), or none apart", ("min_samples",),
         lambda ev: "readings" if ev.n < max(ev.least, 2) or ev.span <= 0 else None),
    Rule("per-call", "leak", "the per-call rule (not for RSS or the cgroup, which pages "
         "move): the slope's interval wholly above `live_floor_bytes`, growth past "
         "`live_min_growth_bytes`, the late slope (interval above zero) keeping "
         "`live_decay_ratio` of the rate",
         ("live_floor_bytes", "live_min_growth_bytes", "live_decay_ratio"), _per_call),
    Rule("near-floor", "ambiguous", "still growing (below), but slowing (late slope under "
         f"{NEAR_FLOOR_DECAY:g} of the whole one) and under {NEAR_FLOOR_MULTIPLE:g} floors: "
         "a short run of a warming cache or allocator, until a longer run says so", (),
         _near_floor),
    Rule("total-floor", "leak", "the slope's interval above zero, its growth over the "
         "floor (the configured floor, its noise band, its largest drawdown), and the late "
         "slope's lower bound, kept up over the span, over it too",
         ("leak_floor_bytes", "heap_floor_bytes", "noise_multiple", "drawdown_multiple"),
         lambda ev: "total" if ev.kept_up else None),
    Rule("stalled", "plateau", "it grew (a trend, or a rise from the first readings to "
         "the last over the floor), then the late slope's upper bound fell under "
         "`stall_fraction` of the rate or would not pass the floor over the span",
         ("stall_fraction",), _stalled),
    Rule("rose", "ambiguous", "it grew, but neither still growing nor stalled: the late "
         "window is too noisy to tell", (), lambda ev: "rise" if ev.rose else None),
    Rule("creep", "creep", "under both floors, but steady: the per-call rule at "
         "`ok_floor_bytes`, where a run of at most the calls 30 s holds "
         f"(and {CREEP_MAX_CALLS:,}) would pass its floor {CREEP_MARGIN:g} times: "
         "ambiguous, and it runs again that long", ("ok_floor_bytes",), _creep),
    Rule("stable", "stable", "its growth within the floor", (),
         lambda ev: "floor" if ev.growth <= ev.floor else None),
    Rule("unsure", "ambiguous", "none of the above (a fall, noise)", (),
         lambda ev: "source"),
)


@dataclass(frozen=True)
class CollectedEvidence:
    """The heap's trend beside the `gc.collect()` after the last call (`memory.garbage`).

    Attributes:
        kind: The heap's kind ("" where the end record has no collection reading).
        creep: The heap's growth is a creep.
        grew: The heap before the collection, less its first reading (bytes).
        kept: The heap after it, less its first reading (bytes).
        floor: The heap's floor.
    """

    kind: str = ""
    creep: bool = False
    grew: float = 0.0
    kept: float = 0.0
    floor: float = 0.0


GARBAGE = "garbage"
GARBAGE_RULES: tuple[Rule[CollectedEvidence], ...] = (
    Rule("uncollected", "as read", "the heap is neither `leak` nor undecided, or the run "
         "has no collection after its last call", (),
         lambda ev: "heap" if ev.kind not in ("leak", "ambiguous") else None),
    Rule("kept-leak", "as read", "the heap leaks, and the collection gave nothing back, or "
         "it keeps over half what it grew, or over its floor: a leak keeps what it grew",
         (), lambda ev: "heap" if ev.kind == "leak" and (
             ev.grew <= 0 or ev.kept > ev.grew / 2 or ev.kept > ev.floor) else None),
    Rule("kept-unsure", "as read", "the heap is undecided, and it keeps over half its "
         "floor, or (a creep) over half what it grew", (),
         lambda ev: "heap" if ev.kind == "ambiguous" and (
             ev.kept > ev.floor / 2 or (ev.creep and ev.kept > ev.grew / 2)) else None),
    Rule("garbage", GARBAGE, "what it grew, the collection gave back: cyclic garbage that "
         "Python's oldest generation frees in its own time, not a leak; the heap reads "
         "stable", (), lambda ev: "heap"),
)


