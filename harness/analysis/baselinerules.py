"""The tables of a cell against its row's baseline (issue 61): the pooled step times'
direction (`POOLED_RULES`) and the peak's (`PEAK_RULES`), whether the pooled comparison
leaves a doubt that interleaved rounds settle (`DOUBT_RULES`), whether the rounds run so
far settle it (`SETTLED_RULES`), what they confirm (`CONFIRM_RULES`), whether they
left a doubt about a slowdown unanswered (`UNSETTLED_RULES`), and whether a higher peak
is a regression (`PEAK_VERDICT_RULES`). `pooled`, `rounds` and `decision`
compute the figures and ask these tables; every threshold they compare is compared here,
the rules' ids kept (`StepComparison.rule`, `PeakComparison.rule`, `VsBaseline.rule`,
`Confirmation.rule`) and shown by `--why`; docs/verdicts.md lists the tables
(`ruledocs.DOC_TABLES`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.analysis.table import Rule, first_of
from harness.analysis.vsbaseline import Confirmation
from harness.thresholds import AnalysisConfig

SLOWER, FASTER, SAME = "slower", "faster", "~"
HIGHER, LOWER = "higher", "lower"


@dataclass(frozen=True)
class PooledEvidence:
    """A cell's pooled step times against its baseline's (`pooled.compare_steps`).

    Attributes:
        cfg: The thresholds.
        p_value: Two-sided Mann-Whitney U p.
        ratio: The cell's median over the baseline's.
        diff_s: How far apart the medians are (seconds).
    """

    cfg: AnalysisConfig
    p_value: float
    ratio: float
    diff_s: float


POOLED_RULES: tuple[Rule[PooledEvidence], ...] = (
    Rule("pooled-unsure", SAME, "the two-sided Mann-Whitney p is not under `alpha`: not "
         "significant", ("alpha",),
         lambda ev: "steps" if not ev.p_value < ev.cfg.alpha else None),
    Rule("pooled-within", SAME, "the ratio of medians lies within [1/`min_ratio`, "
         "`min_ratio`]", ("min_ratio",),
         lambda ev: "steps" if 1.0 / ev.cfg.min_ratio <= ev.ratio <= ev.cfg.min_ratio
         else None),
    Rule("pooled-floor", SAME, "the medians lie under `step_floor_s` apart",
         ("step_floor_s",),
         lambda ev: "steps" if not ev.diff_s >= ev.cfg.step_floor_s else None),
    Rule("pooled-slower", SLOWER, "the ratio of medians past `min_ratio`: a suspected "
         "slowdown, which interleaved rounds confirm", ("min_ratio",),
         lambda ev: "steps" if ev.ratio > ev.cfg.min_ratio else None),
    Rule("pooled-faster", FASTER, "none of the above: the ratio under 1/`min_ratio`", (),
         lambda ev: "steps"),
)


@dataclass(frozen=True)
class PeakEvidence:
    """A cell's peak memory against its baseline's (`pooled.compare_peaks`): the
    thresholds, the ratio and the difference (bytes)."""

    cfg: AnalysisConfig
    ratio: float
    diff: float


PEAK_RULES: tuple[Rule[PeakEvidence], ...] = (
    Rule("peak-within", SAME, "the ratio lies within [1/`peak_min_ratio`, "
         "`peak_min_ratio`]", ("peak_min_ratio",),
         lambda ev: "peak" if 1.0 / ev.cfg.peak_min_ratio <= ev.ratio <= ev.cfg.peak_min_ratio
         else None),
    Rule("peak-floor", SAME, "the peaks differ by `peak_floor_bytes` or less",
         ("peak_floor_bytes",),
         lambda ev: "peak" if not ev.diff > ev.cfg.peak_floor_bytes else None),
    Rule("peak-higher", HIGHER, "the ratio past `peak_min_ratio`: reported",
         ("peak_min_ratio",),
         lambda ev: "peak" if ev.ratio > ev.cfg.peak_min_ratio else None),
    Rule("peak-lower", LOWER, "none of the above: the ratio under 1/`peak_min_ratio`", (),
         lambda ev: "peak"),
)


@dataclass(frozen=True)
class PeakVerdictEvidence:
    """A peak comparison as the row's verdict reads it: its direction and ratio."""

    cfg: AnalysisConfig
    direction: str = SAME
    ratio: float = 1.0


REGRESSION, NOTED = "regression", "noted"
PEAK_VERDICT_RULES: tuple[Rule[PeakVerdictEvidence], ...] = (
    Rule("peak-regression", REGRESSION, "peak RSS higher (rule `peak-higher`) and "
         "`peak_regression_ratio` times the baseline's or more: the verdict's rule "
         "`regression`", ("peak_regression_ratio",),
         lambda ev: "peak" if ev.direction == HIGHER and
         ev.ratio >= ev.cfg.peak_regression_ratio else None),
    Rule("peak-noted", NOTED, "none of the above: a higher peak is reported, no "
         "regression", (), lambda ev: "peak"),
)


@dataclass(frozen=True)
class DoubtEvidence:
    """The pooled comparison as the row asks whether rounds settle it.

    Attributes:
        cfg: The thresholds.
        direction: The pooled step times' direction ("" without step times).
        busy: The worse of the two cells' run-queue delay shares.
    """

    cfg: AnalysisConfig
    direction: str = ""
    busy: float = 0.0


DOUBT, NO_DOUBT = "doubt: rounds", "no doubt"
DOUBT_RULES: tuple[Rule[DoubtEvidence], ...] = (
    Rule("doubt-none-timed", NO_DOUBT, "either cell measured no step time: nothing to "
         "compare", (), lambda ev: "steps" if not ev.direction else None),
    Rule("doubt-suspected", DOUBT, "the pooled step times suspect a change (rule "
         "`pooled-slower` or `pooled-faster`): interleaved rounds confirm it or not", (),
         lambda ev: ev.direction if ev.direction != SAME else None),
    Rule("doubt-busy", DOUBT, "either cell ran with a run-queue delay of `recheck_share` "
         "of its step time or more: load can hide a change as well as fake one",
         ("recheck_share",),
         lambda ev: "host" if ev.busy >= ev.cfg.recheck_share else None),
    Rule("doubt-none", NO_DOUBT, "none of the above: the pooled comparison stands", (),
         lambda ev: "steps"),
)


@dataclass(frozen=True)
class ConfirmEvidence:
    """The rounds that count, as their confirmation reads them (`rounds.decide_rounds`).

    Attributes:
        cfg: The thresholds.
        ratios: Each usable round's ratio, suspect over baseline.
        lo, hi: The `round_confidence` interval of the mean ratio.
        diff_s: The median of the rounds' step time differences (seconds, absolute).
    """

    cfg: AnalysisConfig
    ratios: Sequence[float] = ()
    lo: float = math.nan
    hi: float = math.nan
    diff_s: float = math.nan


FEW = "too few rounds"
CONFIRM_RULES: tuple[Rule[ConfirmEvidence], ...] = (
    Rule("confirm-few", FEW, "fewer than two rounds count: not confirmed", (),
         lambda ev: "rounds" if len(ev.ratios) < 2 else None),
    Rule("confirm-floor", SAME, "the rounds' step times differ by less than "
         "`step_floor_s` (their median difference)", ("step_floor_s",),
         lambda ev: "rounds" if not ev.diff_s >= ev.cfg.step_floor_s else None),
    Rule("confirm-slower", SLOWER, "every round that counts reads the suspect slower, and "
         "the `round_confidence` interval of the mean ratio lies above `min_ratio`",
         ("round_confidence", "min_ratio"),
         lambda ev: "rounds" if all(r > 1 for r in ev.ratios) and
         ev.lo > ev.cfg.min_ratio else None),
    Rule("confirm-faster", FASTER, "every round that counts reads it faster, and the "
         "interval lies under 1/`min_ratio`", ("round_confidence", "min_ratio"),
         lambda ev: "rounds" if all(r < 1 for r in ev.ratios) and
         ev.hi < 1.0 / ev.cfg.min_ratio else None),
    Rule("confirm-none", SAME, "none of the above: no change confirmed", (),
         lambda ev: "rounds"),
)


@dataclass(frozen=True)
class SettledEvidence:
    """The rounds so far (`rounds.settled`): the question and what they read.

    Attributes:
        cfg: The thresholds.
        suspected: The direction put to the test ("~": a busy host asked for them).
        direction: The confirmed direction so far.
        ratios: Each usable round's ratio.
        lo, hi: The interval of the mean ratio.
    """

    cfg: AnalysisConfig
    suspected: str = SAME
    direction: str = SAME
    ratios: Sequence[float] = field(default_factory=tuple)
    lo: float = math.nan
    hi: float = math.nan

    @classmethod
    def of(cls, conf: Confirmation, cfg: AnalysisConfig) -> SettledEvidence:
        """A confirmation's rounds as the table reads them."""
        usable = [r.ratio for r in conf.rounds if r.excluded is None and r.base_s > 0
                  and r.other_s > 0]
        return cls(cfg, conf.suspected, conf.direction, usable, conf.lo, conf.hi)


SETTLED, MORE = "settled", "another round"
SETTLED_RULES: tuple[Rule[SettledEvidence], ...] = (
    Rule("settled-few", MORE, "fewer than two rounds count yet", (),
         lambda ev: "rounds" if len(ev.ratios) < 2 else None),
    Rule("settled-confirmed", SETTLED, "a direction is confirmed (rule `confirm-slower` "
         "or `confirm-faster`)", (),
         lambda ev: ev.direction if ev.direction != SAME else None),
    Rule("settled-disagree", SETTLED, "only an improvement was in doubt, and rounds that "
         "count disagree in direction: every round must agree to confirm it (a doubt about "
         "a slowdown runs on, where more rounds may still settle it as no change)", (),
         lambda ev: "rounds" if ev.suspected == FASTER and any(x > 1 for x in ev.ratios)
         and any(x < 1 for x in ev.ratios) else None),
    Rule("settled-unchanged", SETTLED, "the interval lies wholly on the no-change side of "
         "the question's threshold: under `min_ratio` for a slowdown (or a busy host), "
         "above 1/`min_ratio` for an improvement", ("min_ratio",),
         lambda ev: "rounds" if (ev.lo > 1.0 / ev.cfg.min_ratio if ev.suspected == FASTER
                                 else ev.hi < ev.cfg.min_ratio) else None),
    Rule("settled-open", MORE, "none of the above: another round may change the answer "
         "(up to twice `rounds`)", (), lambda ev: "rounds"),
)


@dataclass(frozen=True)
class UnsettledEvidence:
    """Rounds run for a doubt about a slowdown, as the verdict's rule `unsettled` asks
    whether they left it unanswered (`unsettled`).

    Attributes:
        cfg: The thresholds.
        suspected: The direction put to the test.
        direction: The confirmed direction.
        rounds: The rounds run.
        counted: Timed rounds that counted.
        out: The ratios of the timed rounds left out.
        busy: Every round left out was left out for a busy host.
        rule: The confirmation's rule (`CONFIRM_RULES`).
        lo, hi: The interval of the mean ratio of the rounds that counted.
        why: Why rounds were left out, each reason once ("host busy").
        asked: The rounds the cell's settings asked for (`rounds`; 0: not known).
    """

    cfg: AnalysisConfig
    suspected: str = SAME
    direction: str = SAME
    rounds: int = 0
    counted: int = 0
    out: Sequence[float] = ()
    busy: bool = False
    rule: str = ""
    lo: float = math.nan
    hi: float = math.nan
    why: Sequence[str] = ()
    asked: int = 0

    @classmethod
    def of(cls, conf: Confirmation, cfg: AnalysisConfig, asked: int = 0
           ) -> UnsettledEvidence:
        """A confirmation's rounds as the table reads them (`asked`: the rounds the
        cell's settings asked for)."""
        timed = [r for r in conf.rounds if r.base_s > 0 and r.other_s > 0]
        out = [r for r in timed if r.excluded is not None]
        busy = all(r.excluded and r.excluded.startswith("host busy") for r in out)
        why = dict.fromkeys(LEFT_OUT_WHY.get(r.rule, "a run failed") for r in conf.rounds
                            if r.excluded is not None or r.base_s <= 0 or r.other_s <= 0)
        return cls(cfg, conf.suspected, conf.direction, len(conf.rounds),
                   len(timed) - len(out), [r.ratio for r in out], busy, conf.rule,
                   conf.lo, conf.hi, tuple(why), asked)


# Why a round was left out, by the round's rule (`runrules.ROUND_RULES`), in a few words.
LEFT_OUT_WHY = {"round-busy": "host busy", "round-speeds": "CPU speeds apart",
                "round-failed": "a run failed"}


def _unsettled(ev: UnsettledEvidence) -> str:
    why = "host busy" if ev.busy else "host busy or runs failed"
    return (f"{why}: {ev.rounds - ev.counted} of {ev.rounds} confirmation rounds left out, "
            f"{ev.counted} counted, 2 needed, every one left out {min(ev.out):.2f}x slower "
            "or more; sweep it again on a quieter host")


def _open(ev: UnsettledEvidence) -> str | None:
    """Rounds that counted, confirmed nothing, and whose interval reaches past
    `min_ratio`: a slowdown fits them as well as no change does; in words, with how many
    rounds ran and were left out, and what would settle it."""
    limit = ev.cfg.min_ratio
    if not (ev.counted >= 2 and ev.rule == "confirm-none" and ev.hi > limit):
        return None
    holds = (f"holds both no change and a slowdown past {limit:g}x" if ev.lo <= limit
             else f"lies past {limit:g}x, but not every round read the suspect slower")
    left = ev.rounds - ev.counted
    more = f"`rounds: {2 * ev.asked}`" if ev.asked else "a larger `rounds:`"
    return (f"the rounds' interval ({ev.lo:.2f}..{ev.hi:.2f}) {holds}: {ev.rounds} rounds "
            f"ran, {ev.counted} counted, {left} left out"
            + (f" ({', '.join(ev.why)})" if left and ev.why else "")
            + f"; more rounds ({more} in the matrix's `defaults:`, or a check's "
            "`settings`) or a quieter host would settle it")


ANSWERED, UNSETTLED = "answered", "unsettled"
UNSETTLED_RULES: tuple[Rule[UnsettledEvidence], ...] = (
    Rule("unsettled-faster", ANSWERED, "only an improvement was in doubt: it changes no "
         "verdict", (), lambda ev: "rounds" if ev.suspected == FASTER else None),
    Rule("unsettled-confirmed", ANSWERED, "the rounds confirmed a direction", (),
         lambda ev: ev.direction if ev.direction != SAME else None),
    Rule("unsettled-open", UNSETTLED, "two rounds or more counted, confirmed nothing (rule "
         "`confirm-none`), and their interval reaches past `min_ratio`: a slowdown fits "
         "them as well as no change does (rounds that disagree run on, up to twice "
         "`rounds`), so no answer, never `ok`: more rounds or a quieter host settle it",
         ("min_ratio",), _open),
    Rule("unsettled-counted", ANSWERED, "two rounds or more counted, and their interval "
         "lies under `min_ratio` (or their step times within `step_floor_s`): their answer "
         "stands", (), lambda ev: "rounds" if ev.counted >= 2 else None),
    Rule("unsettled-few-out", ANSWERED, "fewer than two rounds were left out", (),
         lambda ev: "rounds" if len(ev.out) < 2 else None),
    Rule("unsettled-load", ANSWERED, "a round left out read the suspect `min_ratio` or "
         "less: load alone makes such rounds (a clean pair on a loaded host read 0.57x, "
         "1.10x, 1.61x), no slowdown stands behind them", ("min_ratio",),
         lambda ev: "rounds" if any(r <= ev.cfg.min_ratio for r in ev.out) else None),
    Rule("unsettled-rounds", UNSETTLED, "none of the above: every round left out (two at "
         "least) read the suspect slower past `min_ratio`, a slowdown load did not make: "
         "the verdict's rule `unsettled`", (), _unsettled),
)


def unsettled(conf: Confirmation, cfg: AnalysisConfig, asked: int = 0) -> str:
    """Why rounds run for a doubt about a slowdown (suspected slower, or a busy host)
    settled nothing, or "" where they did (`UNSETTLED_RULES`): two or more counted and
    their interval holds a slowdown as well as no change (issue 78: rounds 0.94 and
    2.29, 90 % CI 0.09..24.03, read `ok`); or fewer than two counted, and the rounds left
    out read the suspect slower past `min_ratio`, each of them (two at least): a change
    the load that left them out does not make (issue 61: 15x in every round, every one
    left out, read `ok`). `asked`: the rounds the cell's settings asked for."""
    rule, named = first_of(UnsettledEvidence.of(conf, cfg, asked), UNSETTLED_RULES)
    return named if rule.says == UNSETTLED else ""
