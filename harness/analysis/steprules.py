"""The tables of a run's step times (issue 61): what a run's step-time trend is
(`STEP_RULES`, over a `StepEvidence` of its early and late windows: too few, flat, rising
but not bin after bin, come back, a slowdown) and whether a busy host explains a
slowdown (`LOAD_RULES`, over a `LoadEvidence`). `stepreading` computes the figures and
asks these tables; every threshold they compare is compared here, each rule's id kept
(`StepTrend.rule`) and shown by `--why`, and docs/verdicts.md lists both tables
(`ruledocs.DOC_TABLES`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harness.analysis.table import Rule, first_of
from harness.analysis.trends import StepTrend
from harness.thresholds import AnalysisConfig

# What a step trend is (`STEP_RULES`).
FEW, FLAT, UNSTEADY, BACK, SLOWDOWN = ("too few", "flat", "not bin after bin", "came back",
                                       "slowdown")
# Whether a slowdown stands beside the host's load (`LOAD_RULES`).
STANDS, VOIDED = "stands", "busy host"


@dataclass(frozen=True)
class StepEvidence:
    """A run's step times, early against late (`stepreading.step_trend`).

    Attributes:
        cfg: The thresholds.
        n: Step times.
        p_value: One-sided Mann-Whitney U p, late slower than early.
        ratio: The late window's median over the early one's.
        rise_s: The late median less the early one (seconds).
        trend_p: One-sided Kendall tau p over bin medians: rising bin after bin.
        back: Where the rise came back down (`stepreading.came_back`, a step index; 0:
            it did not), read only where the rule that asks it is reached.
    """

    cfg: AnalysisConfig
    n: int
    p_value: float = 1.0
    ratio: float = 1.0
    rise_s: float = 0.0
    trend_p: float = 1.0
    back: Callable[[], int] = int

    @classmethod
    def of(cls, t: StepTrend, cfg: AnalysisConfig) -> StepEvidence:
        """A trend's own figures as the table reads them (where its rise came back: as
        it kept it)."""
        return cls(cfg, t.n, t.p_value, t.ratio, t.late_median_s - t.early_median_s,
                   t.trend_p, lambda: t.came_back_at)


def _flat(ev: StepEvidence) -> str | None:
    c = ev.cfg
    rose = ev.p_value < c.alpha and ev.ratio > c.min_ratio and ev.rise_s >= c.step_floor_s
    return None if rose else "steps"


def _back(ev: StepEvidence) -> str | None:
    at = ev.back()
    return f"step {at:,}" if at else None


STEP_RULES: tuple[Rule[StepEvidence], ...] = (
    Rule("steps-too-few", FEW, "fewer step times than `min_step_samples`: no evidence "
         "either way", ("min_step_samples",),
         lambda ev: "steps" if ev.n < ev.cfg.min_step_samples else None),
    Rule("steps-flat", FLAT, "late steps (the last `step_window`) not slower than early "
         "ones: the one-sided Mann-Whitney p not under `alpha`, the ratio of medians not "
         "past `min_ratio`, or the medians under `step_floor_s` apart",
         ("step_window", "alpha", "min_ratio", "step_floor_s"), _flat),
    Rule("steps-unsteady", UNSTEADY, "late steps slower, but not rising bin after bin "
         "(the one-sided Kendall tau over bin medians not under `alpha`): a host that "
         "drifts between fast and slow regimes only happens to end slower", ("alpha",),
         lambda ev: "bins" if not ev.trend_p < ev.cfg.alpha else None),
    Rule("steps-came-back", BACK, "rising bin after bin, but a bin of the last 40 % of "
         "the run lies under half the rise by 4 standard errors of its median: a cost "
         "that cycles with the scenario's input, not a slowdown that lasts", (), _back),
    Rule("steps-slowdown", SLOWDOWN, "none of the above: late steps slower, rising bin "
         "after bin, and lasting", (), lambda ev: "steps"),
)


def rose(ev: StepEvidence) -> bool:
    """Late steps slower than early ones (neither too few nor flat): what a slowdown
    needs first, and what keeps a live look from stopping a run `ok`."""
    return first_of(ev, STEP_RULES)[0].says not in (FEW, FLAT)


@dataclass(frozen=True)
class LoadEvidence:
    """A slowdown beside the host's load (`stepreading.read_steps`).

    Attributes:
        cfg: The thresholds.
        share: The share of the extra step time the rise in run-queue delay or
            throttling per step accounts for (None: not measured).
        extra_s: The extra step time (late median less early, seconds).
        cpu_rise_s: What CPU time per step rose by (None: not recorded).
        cpu_ratio: CPU time per step, late over early, where its own trend is a
            slowdown (None: not recorded, or no slowdown of its own).
    """

    cfg: AnalysisConfig
    share: float | None = None
    extra_s: float = 0.0
    cpu_rise_s: float | None = None
    cpu_ratio: float | None = None


LOAD_RULES: tuple[Rule[LoadEvidence], ...] = (
    Rule("load-more-work", STANDS, "CPU time per step rose by half the extra step time "
         "or more: the step did more work, whatever the load", (),
         lambda ev: "cpu" if ev.cpu_rise_s is not None and
         ev.cpu_rise_s >= ev.extra_s / 2 else None),
    Rule("load-cpu-slower", STANDS, "CPU time per step, which holds no waiting, is itself "
         "a slowdown past `busy_min_ratio`: load stretches a step's CPU time by tens of "
         "percent on a shared core, never by a factor, while the time it waits in the "
         "run queue grows with the step (a step doing 6x the work on a host at load 15 "
         "waits 6x longer too)", ("busy_min_ratio",),
         lambda ev: "cpu" if ev.cpu_ratio is not None and
         ev.cpu_ratio >= ev.cfg.busy_min_ratio else None),
    Rule("load-busy", VOIDED, "the rise in run-queue delay or throttling per step "
         "accounts for `contention_share` of the extra step time: the host was busy "
         "(the verdict's rule `busy-host`)", ("contention_share",),
         lambda ev: "host" if ev.share is not None and
         ev.share >= ev.cfg.contention_share else None),
    Rule("load-own", STANDS, "none of the above: the slowdown is the step's own", (),
         lambda ev: "steps"),
)


