"""The rules of the one memory decision: one table, the doc made from it, the rule that
decided kept in the result, and `--why` printing each in order (issue 41)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from fakeruntime import Behaviour
from sweepkit import FakeSweep

from harness.analysis.kinds import BAD
from harness.analysis.rules import RULE_IDS, RULES, doc_with_rules
from harness.cli import main
from harness.thresholds import AnalysisConfig

DOC = Path(__file__).resolve().parents[3] / "docs" / "verdicts.md"


def test_docs_verdicts_md_lists_the_rules_of_the_table() -> None:
    defaults = {f.name: getattr(AnalysisConfig(), f.name)
                for f in dataclasses.fields(AnalysisConfig)}
    text = DOC.read_text()
    assert text == doc_with_rules(text, defaults), (
        "docs/verdicts.md's table of rules differs from analysis.rules.RULES\n"
        "fix: python3 -m harness.analysis.rules docs/verdicts.md")


def test_rules_are_named_once_and_read_only_analysis_settings() -> None:
    assert len(set(RULE_IDS)) == len(RULES) and RULES[-1].id == "ok"
    names = {f.name for f in dataclasses.fields(AnalysisConfig)}
    for rule in RULES:
        assert set(rule.thresholds) <= names, rule.id


@pytest.mark.parametrize(("behave", "verdict", "rule"), [
    (Behaviour(), "ok", "ok"),
    (Behaviour(leak_per_iter=16384.0), "leak", "leak"),
    (Behaviour(leak_per_iter=16384.0, leak_until=100), "plateau", "plateau"),
])
def test_the_rule_that_decided_is_kept_and_why_prints_every_rule(
        fake_sweep: FakeSweep, capsys: pytest.CaptureFixture[str], behave: Behaviour,
        verdict: str, rule: str) -> None:
    run = fake_sweep(["v1"], behave, report=True, plan=True)
    (res,) = run.results.values()
    assert (res.verdict, res.rule) == (verdict, rule), res.reason
    # exits as `harness report` does on the run: 1 on a bad verdict (issue 63 item 12)
    assert main(["report", str(run.root), "--why", res.id]) == (1 if verdict in BAD else 0)
    out = capsys.readouterr().out
    assert f"decided by rule: {rule}" in out
    said = [line for line in out.splitlines() if line[:1].isdigit()]
    assert [line.split(":")[0].split(". ")[1] for line in said] == list(RULE_IDS)
    fired = [line for line in said if ": fired" in line]
    assert len(fired) == 1 and fired[0].startswith(f"{RULE_IDS.index(rule) + 1}. {rule}:")
    # The last rule is "none of the above": after another rule decided, it is not
    # reached (never "would fire" beside a leak).
    if rule != RULE_IDS[-1]:
        assert said[-1].startswith(f"{len(RULE_IDS)}. {RULE_IDS[-1]}: not reached"), said[-1]


def test_why_names_a_cell_it_does_not_hold(fake_sweep: FakeSweep,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    run = fake_sweep(["v1"], report=True, plan=True)
    assert main(["report", str(run.root), "--why", "nope"]) == 2
    err = capsys.readouterr().err
    assert "--why nope" in err and "fix:" in err


def test_every_rule_has_its_words_in_one_place() -> None:
    # verdict_of words the rule that fired from `WORDS`, keyed by the rule's id: every
    # rule a run alone can fire has words there, and the rest are worded where their
    # facts are; no rule has both, none neither (issue 61 point 5)
    from harness.analysis.decision import WORDED_ELSEWHERE, WORDS
    from harness.analysis.rules import RULE_IDS

    assert not set(WORDS) & WORDED_ELSEWHERE
    assert set(WORDS) | WORDED_ELSEWHERE == set(RULE_IDS)
