"""The rules of a run's course in the one table (issue 61 point 6): when a live look
stops a run and whether a confirmation round counts are rules (`analysis.rules`), the
first that fires decides, its id is kept and `--why` names it."""

from __future__ import annotations

import dataclasses

import pytest
from fakeruntime import Behaviour
from sweepkit import FakeSweep

from harness.analysis.rules import (
    COUNTS,
    LEFT_OUT,
    LIVE_RULES,
    ROUND_RULES,
    RUN_ON,
    STOP_OK,
    LiveEvidence,
    RoundEvidence,
    first_of,
)
from harness.cli import main
from harness.thresholds import AnalysisConfig


@pytest.mark.parametrize("table", [LIVE_RULES, ROUND_RULES])
def test_each_table_is_named_once_reads_settings_and_ends_in_a_rule_that_fires(
        table: tuple) -> None:  # type: ignore[type-arg]
    names = {f.name for f in dataclasses.fields(AnalysisConfig)}
    assert len({r.id for r in table}) == len(table)
    for rule in table:
        assert set(rule.thresholds) <= names, rule.id
    empty = LiveEvidence() if table is LIVE_RULES else RoundEvidence()
    assert table[-1].test(empty) is not None


def test_the_live_look_s_rules_in_order() -> None:
    flat = LiveEvidence(flat="heap", upper=3.0, floor=16.0, measured=0.3, ok_share=0.5)
    fired, _ = first_of(flat, LIVE_RULES)
    assert fired.id == "live-early" and fired.says == RUN_ON
    later = dataclasses.replace(flat, measured=0.6)
    fired, _ = first_of(later, LIVE_RULES)
    assert fired.id == "live-ok" and fired.says == STOP_OK
    rising = dataclasses.replace(later, rose=lambda: True)
    assert first_of(rising, LIVE_RULES)[0].id == "live-rising"
    # a slope interval (over the run so far or its late third) up to the floor: no ok
    growing = dataclasses.replace(later, upper=16.0)
    assert first_of(growing, LIVE_RULES)[0].id == "live-run-on"
    small = LiveEvidence(leak="heap", grown=1e6, large=256e6)
    assert first_of(small, LIVE_RULES)[0].id == "live-run-on"
    large = dataclasses.replace(small, grown=300e6)
    assert first_of(large, LIVE_RULES)[0].id == "live-leak"


def test_the_rounds_rules_in_order() -> None:
    busy = (("baseline", 0.9), ("suspect", 0.0))
    assert first_of(RoundEvidence(failed="exit 1", busy=busy), ROUND_RULES)[0].says == LEFT_OUT
    # CPU speeds 1.6x apart, 1.3x as measured and 1.0x at one speed: the change rests on
    # the correction, busy or not
    apart = RoundEvidence(plain=1.3, scaled=1.0, speed=1.6, busy=busy, cpu=1.0)
    assert first_of(apart, ROUND_RULES)[0].id == "round-speeds"
    assert first_of(dataclasses.replace(apart, plain=2.0, scaled=2.5, cpu=2.2), ROUND_RULES)[0].id \
        == "round-busy-agrees"
    agrees = RoundEvidence(plain=1.0, scaled=1.0, speed=1.0, busy=busy, cpu=1.02)
    assert first_of(agrees, ROUND_RULES)[0].says == COUNTS
    assert first_of(dataclasses.replace(agrees, cpu=None), ROUND_RULES)[0].id == "round-busy"
    # 2x on the wall clock, CPU time 1.2x: not both past busy_min_ratio
    assert first_of(dataclasses.replace(agrees, scaled=2.0, cpu=1.2),
                    ROUND_RULES)[0].id == "round-busy"
    assert first_of(dataclasses.replace(agrees, scaled=2.0, cpu=1.8), ROUND_RULES)[0].says == COUNTS
    said = first_of(dataclasses.replace(agrees, cpu=None), ROUND_RULES)[1]
    assert said == "host busy: run-queue delay 90% of the baseline run's step time"
    assert first_of(RoundEvidence(plain=1.0, scaled=1.0), ROUND_RULES)[0].id == "round"


def test_why_names_the_rule_of_each_round(fake_sweep: FakeSweep,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN v2 2x slower; its confirmation runs (shorter) on a busy host, CPU time
    # per step recorded there, 2x as well
    def behave(cell):  # type: ignore[no-untyped-def]
        slow = cell.image.label == "v2"
        busy = cell.settings.iterations < 300
        return Behaviour(step_s=0.002 if slow else 0.001,
                         rq_share=0.8 if busy else 0.0,
                         cpu_s=(0.0004 if slow else 0.0002) if busy else None)

    run = fake_sweep(["v1", "v2"], behave, report=True, plan=True,
                     defaults={"iterations": 400, "warmup": 20, "repeats": 0})
    res = run.outcome.results["v2.gpu0.loop"]
    assert res.verdict == "regression", res.reason
    # exits as `harness report` on a regression (issue 63 item 12)
    assert main(["report", str(run.root), "--why", res.id]) == 1
    out = capsys.readouterr().out
    assert "round 1: rule round-busy-agrees: counts" in out, out
    # and the rules of its step times (`rules.STEP_RULES`, `rules.POOLED_RULES`, ...) that decided
    assert "step times: rule steps-flat: flat" in out, out
    assert "vs v1, pooled steps: rule pooled-slower: slower" in out, out
    assert "vs v1: rule doubt-suspected: doubt: rounds" in out, out
    assert "rounds: rule confirm-slower: slower; after the last, rule settled-confirmed: " \
        "settled; rule unsettled-confirmed: answered" in out, out


def _rerun(**kw: object) -> str:
    from harness.analysis.rules import RerunEvidence, rerun_rule

    defaults: dict[str, object] = {"undecided": True}
    return rerun_rule(RerunEvidence(**{**defaults, **kw}))[0].id  # type: ignore[arg-type]


def test_the_re_runs_rules_in_order() -> None:
    from harness.analysis.rules import AGAIN, RERUN_RULES, STANDS

    assert _rerun(undecided=False, spent=True) == "rerun-decided"
    assert _rerun(spent=True, script=True) == "rerun-spent"
    assert _rerun(script=True, budgeted=True, capped=True) == "rerun-script"
    # a capped run keeps its budget: its time is what it took, no timeout to pass
    assert _rerun(budgeted=True, capped=True, seconds=lambda k: 1e9, timeout=10) == \
        "rerun-cap"
    # each kind's attempt is timed for itself, its facts naming the kind
    seen: list[str] = []

    def seconds(kind: str) -> float:
        seen.append(kind)
        return 30.0

    assert _rerun(budgeted=True, short=True, seconds=seconds, timeout=20) == "rerun-timeout"
    assert seen == ["calls"]
    assert _rerun(budgeted=True, short=True, seconds=seconds, timeout=40) == "rerun-calls"
    assert _rerun(budgeted=True, seconds=seconds, timeout=40) == "rerun-budget"
    assert _rerun(seconds=seconds, timeout=40) == "rerun-longer"
    assert _rerun(seconds=seconds, timeout=20) == "rerun-timeout"
    # an `overrun` bound: the attempt the rules below would run (a capped run's too)
    # stands where it would pass what is left of the bound, runs where it fits
    assert _rerun(budgeted=True, seconds=seconds, timeout=40, left=20) == "rerun-overrun"
    assert _rerun(budgeted=True, capped=True, seconds=seconds, left=20) == "rerun-overrun"
    assert _rerun(budgeted=True, capped=True, seconds=seconds, left=40) == "rerun-cap"
    assert _rerun(budgeted=True, seconds=seconds, timeout=40, left=40) == "rerun-budget"
    # the bound counts the cell's own time: a busy host's stretch of the wall clock is not
    # the cell's (30 s of wall clock, 15 of its own, 20 left: it runs)
    assert _rerun(budgeted=True, seconds=seconds, own=lambda k: 15.0, timeout=40,
                  left=20) == "rerun-budget"
    assert _rerun(budgeted=True, seconds=seconds, own=lambda k: 25.0, timeout=40,
                  left=20) == "rerun-overrun"
    seen.clear()
    assert _rerun(budgeted=True, short=True, seconds=seconds, left=20) == "rerun-overrun"
    assert seen == ["calls"]
    # --iterations N: a busy host alone runs the same length again where it fits, any
    # other doubt stands (a re-run would be longer than N)
    assert _rerun(asked=True, busy=True, seconds=seconds, timeout=40) == "rerun-busy"
    assert _rerun(asked=True, busy=True, seconds=seconds, timeout=20) == "rerun-asked"
    assert _rerun(asked=True, busy=True, seconds=seconds, left=20) == "rerun-asked"
    assert _rerun(asked=True, seconds=seconds, timeout=40) == "rerun-asked"
    assert _rerun(asked=True, busy=True, spent=True) == "rerun-spent"
    says = {r.id: r.says for r in RERUN_RULES}
    assert says["rerun-busy"] == AGAIN
    assert says["rerun-overrun"] == STANDS
    assert {says["rerun-cap"], says["rerun-longer"]} == {AGAIN}
    assert says["rerun-timeout"] == says["rerun-spent"] == STANDS


def test_each_attempt_keeps_its_re_run_rule_and_why_names_it(
        fake_sweep: FakeSweep, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a cell whose growth a filling cache still explains (ambiguous, runs again)
    # and one that leaks (decided at once), one repeat allowed
    run = fake_sweep(["v1", "v2"], {"v1": Behaviour(leak_per_iter=64 * 1024, leak_until=250),
                                    "v2": Behaviour(leak_per_iter=64 * 1024)},
                     report=True, defaults={"iterations": 300, "warmup": 20, "repeats": 1})
    leak = run.outcome.results["v2.gpu0.loop"]
    assert leak.verdict == "leak", leak.reason
    assert [a.rerun for a in leak.attempts] == ["rerun-decided"]
    cache = run.outcome.results["v1.gpu0.loop"]
    # THEN every attempt names the rule that ran it again or let it stand
    assert all(a.rerun for a in cache.attempts), cache.attempts
    if len(cache.attempts) > 1:
        assert cache.attempts[0].rerun == "rerun-longer", cache.attempts
    assert main(["report", str(run.root), "--why", leak.id]) in (0, 1)
    out = capsys.readouterr().out
    assert "attempt 1 (leak): rule rerun-decided: the cell stands" in out, out
