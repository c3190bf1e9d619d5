"""A cell says every bad finding it has (issue 63 item 8): a leak whose steps are also
slower than its row's baseline is put to the interleaved rounds, and the slowdown they
confirm is said beside the leak (its reason, findings, words, grid token, issue draft
and result.json); the verdict stays the leak. A leak at the baseline's speed runs no
rounds and claims no slowdown."""

from __future__ import annotations

import json

from fakeruntime import Behaviour
from sweepkit import FakeSweep

from harness.cli import main
from harness.report.grid import token
from harness.result.model import cell_text

# ~320 B a call kept (a logging handler per call), the bad image's every call 5x v1's.
LEAK = 320.0


def test_a_leak_that_is_also_slower_than_its_baseline_says_both(
        fake_sweep: FakeSweep) -> None:
    # GIVEN v2 leaks and every step takes 5x v1's; v3 leaks alike at v1's speed
    run = fake_sweep(["v1", "v2", "v3"], {
        "v2": Behaviour(leak_per_iter=LEAK, step_s=0.005),
        "v3": Behaviour(leak_per_iter=LEAK)},
        defaults={"iterations": 2000, "warmup": 20, "repeats": 0})
    slow = run.outcome.results["v2.gpu0.loop"]
    same = run.outcome.results["v3.gpu0.loop"]
    # THEN both are leaks, by the leak rule
    assert slow.verdict == same.verdict == "leak", (slow.reason, same.reason)
    assert slow.rule == same.rule == "leak"
    # AND v2 ran rounds against v1 that confirmed it slower, and says so: its reason,
    # a finding, the fact the table reads after the leak rule, its words
    vs = slow.vs_baseline
    assert vs is not None and vs.confirmation is not None, slow.reason
    conf = vs.confirmation
    assert conf.confirmed and conf.direction == "slower" and conf.ratio > 4, conf.reason
    assert f"also slower than v1: steps {conf.ratio:.2f}x v1, confirmed" in slow.reason, \
        slow.reason
    assert any(f.kind == "vs-baseline" and "slower than v1" in f.text for f in slow.findings)
    assert slow.facts is not None and slow.facts.regression.startswith("steps ")
    text = cell_text(slow)
    assert text.startswith("leak: heap +"), text
    assert f"time {conf.interval()} baseline (slower in {len(conf.decided_by)} " \
           "interleaved rounds" in text, text
    assert token("leak", slow).startswith("L") and "+R" in token("leak", slow)
    # AND a leak at the baseline's speed ran no rounds and says nothing of a slowdown
    assert same.vs_baseline is not None and same.vs_baseline.confirmation is None
    assert "slower" not in same.reason and "baseline" not in cell_text(same), same.reason
    assert "+R" not in token("leak", same)
    assert same.facts is not None and not same.facts.regression


def test_the_confirmed_slowdown_is_in_the_stored_result_and_the_issue(
        fake_sweep: FakeSweep, capsys: object) -> None:
    # GIVEN v2 leaks and is 5x slower than v1, swept and stored
    run = fake_sweep(["v1", "v2"], {"v2": Behaviour(leak_per_iter=LEAK, step_s=0.005)},
                     defaults={"iterations": 2000, "warmup": 20, "repeats": 0}, plan=True)
    stored = json.loads((run.root / "cells" / "v2.gpu0.loop" / "result.json")
                        .read_text())
    # THEN result.json keeps the leak and the rounds that confirmed the slowdown
    assert stored["verdict"] == "leak"
    conf = stored["vs_baseline"]["confirmation"]
    assert conf["confirmed"] and conf["direction"] == "slower", conf
    assert "also slower than v1" in stored["reason"]
    # AND the issue draft's title says both, with the rounds' ratio
    assert main(["report", str(run.root), "--issue", "gpu0.loop"]) == 1   # as `report`
    title = capsys.readouterr().out.splitlines()[0]     # type: ignore[attr-defined]
    assert title.startswith("# loop leaks memory and is ") and "x slower than v1 (in " \
        in title, title


def test_without_rounds_a_leak_claims_no_slowdown(fake_sweep: FakeSweep) -> None:
    # GIVEN v2 leaks and is 5x slower than v1, in a matrix that asks for no rounds
    run = fake_sweep(["v1", "v2"], {"v2": Behaviour(leak_per_iter=LEAK, step_s=0.005)},
                     defaults={"iterations": 2000, "warmup": 20, "repeats": 0, "rounds": 0})
    slow = run.outcome.results["v2.gpu0.loop"]
    # THEN it is a leak, and the pooled 5x alone is said nowhere
    assert slow.verdict == "leak" and slow.vs_baseline is not None
    assert slow.vs_baseline.confirmation is None
    assert "slower" not in slow.reason and "baseline" not in cell_text(slow), slow.reason
