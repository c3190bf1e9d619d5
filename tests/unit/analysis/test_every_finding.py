"""A cell says every bad finding it has (issue 63 item 8): a leak whose steps are also
slower than the row's baseline says both, the slowdown with where its figure came from
(the pooled step times; no rounds ran for a cell its leak already decided)."""

from __future__ import annotations

from fakeruntime import Behaviour
from sweepkit import FakeSweep


def test_a_leak_that_is_also_slower_than_its_baseline_says_both(fake_sweep: FakeSweep) -> None:
    # GIVEN v2 leaks 16 KiB a call and every step takes 5x v1's; v3 leaks alike at v1's speed
    run = fake_sweep(["v1", "v2", "v3"], {
        "v2": Behaviour(leak_per_iter=16384, step_s=0.005),
        "v3": Behaviour(leak_per_iter=16384)},
        defaults={"iterations": 300, "warmup": 20, "repeats": 0})
    slow = run.outcome.results["v2.gpu0.loop"]
    same = run.outcome.results["v3.gpu0.loop"]
    # THEN both are leaks; v2's reason and findings say it is slower than v1 too, and
    # that the figure is the pooled step times', not rounds'
    assert slow.verdict == same.verdict == "leak", (slow.reason, same.reason)
    assert "slower than v1" in slow.reason and "pooled" in slow.reason, slow.reason
    assert any(f.kind == "vs-baseline" and "slower" in f.text for f in slow.findings)
    # AND a leak at the baseline's speed says nothing of a slowdown
    assert "slower than" not in same.reason, same.reason
