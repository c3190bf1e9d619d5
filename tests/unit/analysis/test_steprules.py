"""The step times' and the baseline comparison's decisions are rules of tables (issue 61
item 5): `rules.STEP_RULES` and `rules.LOAD_RULES` (a run's step trend, the load beside
a slowdown) and the baseline's tables of `rules` (the pooled steps' and peak's
directions, the doubt that runs rounds, what they confirm, whether they settle it or
leave it unanswered, a peak regression), each rule once, reading settings, the first
that fires deciding."""

from __future__ import annotations

import dataclasses

from harness.analysis import rules as b
from harness.analysis.rules import (
    LOAD_RULES,
    STEP_RULES,
    TABLES,
    LoadEvidence,
    StepEvidence,
    first_of,
    rose,
)
from harness.thresholds import AnalysisConfig

CFG = AnalysisConfig()
# The floor a matrix may still set (`analysis: {step_floor_s: ...}`; none by default).
FLOORED = AnalysisConfig(step_floor_s=1e-5)


def test_every_table_names_each_rule_once_and_reads_only_settings() -> None:
    names = {f.name for f in dataclasses.fields(AnalysisConfig)}
    # (the verdict's own table, `RULES`, shares some ids with the others: its own test)
    ids = [r.id for t in TABLES if t.key != "verdict" for r in t.rules]
    assert len(ids) == len(set(ids)), ids
    for t in TABLES:
        for rule in t.rules:
            assert set(rule.thresholds) <= names, rule.id


def test_a_step_trend_in_order() -> None:
    rising = StepEvidence(CFG, 400, 1e-9, 1.5, 1e-3, 1e-9)
    assert first_of(dataclasses.replace(rising, n=3), STEP_RULES)[0].id == "steps-too-few"
    assert first_of(dataclasses.replace(rising, ratio=1.05), STEP_RULES)[0].id == "steps-flat"
    assert first_of(dataclasses.replace(rising, rise_s=1e-6), STEP_RULES)[0].id == "steps-slowdown"
    assert first_of(dataclasses.replace(rising, cfg=FLOORED, rise_s=1e-6),
                    STEP_RULES)[0].id == "steps-flat"
    assert first_of(dataclasses.replace(rising, trend_p=0.3), STEP_RULES)[0].id == "steps-unsteady"
    assert first_of(dataclasses.replace(rising, back=lambda: 300), STEP_RULES)[1] == "step 300"
    assert first_of(rising, STEP_RULES)[0].id == "steps-slowdown"
    assert rose(dataclasses.replace(rising, trend_p=0.3)) and not rose(
        dataclasses.replace(rising, p_value=0.1))


def test_a_slowdown_beside_the_load_in_order() -> None:
    assert first_of(LoadEvidence(CFG, 0.9, 1e-3, 6e-4), LOAD_RULES)[0].id == "load-more-work"
    assert first_of(LoadEvidence(CFG, 0.9, 1e-3, 1e-4), LOAD_RULES)[0].id == "load-busy"
    assert first_of(LoadEvidence(CFG, 0.9, 1e-3, 3e-4, 3.9), LOAD_RULES)[0].id == "load-cpu-slower"
    assert first_of(LoadEvidence(CFG, 0.9, 1e-3, 1e-4, 1.2), LOAD_RULES)[0].id == "load-busy"
    assert first_of(LoadEvidence(CFG, 0.4, 1e-3, None), LOAD_RULES)[0].id == "load-own"


def test_against_the_baseline_in_order() -> None:
    def pooled(p: float, ratio: float, diff: float) -> str:
        return first_of(b.PooledEvidence(CFG, p, ratio, diff), b.POOLED_RULES)[0].id

    assert pooled(0.1, 2.0, 1.0) == "pooled-unsure"
    assert pooled(float("nan"), 2.0, 1.0) == "pooled-unsure"
    assert pooled(1e-9, 1.05, 1.0) == "pooled-within"
    assert pooled(1e-9, 2.0, 1e-7) == "pooled-slower"
    assert first_of(b.PooledEvidence(FLOORED, 1e-9, 2.0, 1e-7),
                    b.POOLED_RULES)[0].id == "pooled-floor"
    assert (pooled(1e-9, 2.0, 1.0), pooled(1e-9, 0.5, 1.0)) == ("pooled-slower",
                                                                  "pooled-faster")

    def peak(ratio: float, diff: float) -> str:
        return first_of(b.PeakEvidence(CFG, ratio, diff), b.PEAK_RULES)[0].says

    assert (peak(1.05, 1e9), peak(2.0, 1e3), peak(2.0, 1e9), peak(0.5, 1e9)) == (
        "~", "~", "higher", "lower")
    verdict = b.PeakVerdictEvidence(CFG, "higher", 1.6)
    assert first_of(verdict, b.PEAK_VERDICT_RULES)[0].says == b.REGRESSION
    assert first_of(dataclasses.replace(verdict, ratio=1.2),
                    b.PEAK_VERDICT_RULES)[0].says == b.NOTED
    assert first_of(b.DoubtEvidence(CFG, "", 0.9), b.DOUBT_RULES)[0].says == b.NO_DOUBT
    assert first_of(b.DoubtEvidence(CFG, "slower"), b.DOUBT_RULES)[0].id == "doubt-suspected"
    assert first_of(b.DoubtEvidence(CFG, "~", CFG.recheck_share),
                    b.DOUBT_RULES)[0].id == "doubt-busy"
    assert first_of(b.DoubtEvidence(CFG, "~", 0.1), b.DOUBT_RULES)[0].says == b.NO_DOUBT


def test_the_rounds_in_order() -> None:
    slower = b.ConfirmEvidence(CFG, (1.5, 1.6, 1.55), 1.3, 1.8, 1e-3)
    assert first_of(dataclasses.replace(slower, ratios=(1.5,)),
                    b.CONFIRM_RULES)[0].says == b.FEW_ROUNDS
    # two that read it are not enough, but where two are all that run
    assert first_of(dataclasses.replace(slower, ratios=(1.5, 1.6)),
                    b.CONFIRM_RULES)[0].id == "confirm-short"
    assert first_of(dataclasses.replace(slower, ratios=(1.5, 1.6), least=2),
                    b.CONFIRM_RULES)[0].says == b.SLOWER
    assert first_of(dataclasses.replace(slower, diff_s=1e-7),
                    b.CONFIRM_RULES)[0].says == b.SLOWER
    assert first_of(dataclasses.replace(slower, cfg=FLOORED, diff_s=1e-7),
                    b.CONFIRM_RULES)[0].id == "confirm-floor"
    assert first_of(slower, b.CONFIRM_RULES)[0].says == b.SLOWER
    assert first_of(dataclasses.replace(slower, lo=1.05), b.CONFIRM_RULES)[0].id == "confirm-none"
    faster = b.ConfirmEvidence(CFG, (0.5, 0.6, 0.55), 0.4, 0.7, 1e-3)
    assert first_of(faster, b.CONFIRM_RULES)[0].says == b.FASTER
    open_ = b.SettledEvidence(CFG, "slower", "~", (1.05, 1.2), 0.9, 1.3)
    assert first_of(dataclasses.replace(open_, ratios=(1.2,)),
                    b.SETTLED_RULES)[0].id == "settled-few"
    assert first_of(dataclasses.replace(open_, direction="slower"), b.SETTLED_RULES)[0].id == \
        "settled-confirmed"
    # rounds that disagree about a slowdown run on (issue 78): more may settle it
    assert first_of(dataclasses.replace(open_, ratios=(0.9, 1.2)), b.SETTLED_RULES)[0].says \
        == b.MORE
    assert first_of(dataclasses.replace(open_, suspected="faster", ratios=(0.9, 1.2)),
                    b.SETTLED_RULES)[0].id == "settled-disagree"
    assert first_of(dataclasses.replace(open_, hi=1.08),
                    b.SETTLED_RULES)[0].id == "settled-unchanged"
    assert first_of(open_, b.SETTLED_RULES)[0].says == b.MORE
    # an improvement in doubt is settled once the interval lies above 1/min_ratio
    faster_q = dataclasses.replace(open_, suspected="faster", ratios=(0.95, 0.97), lo=0.93)
    assert first_of(faster_q, b.SETTLED_RULES)[0].id == "settled-unchanged"
