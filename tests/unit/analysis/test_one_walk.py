"""Issue 41, done means: a walk of one cell from run to report enters the verdict's module
once. The memory decision (`analysis.memory.memory_reading`) and the verdict
(`analysis.decision.decide`) are counted wherever a module holds them, over a sweep and
then every reader of its results (report, its formats, history): the readers read the
stored verdict, never deciding again."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fakeruntime import Behaviour
from sweepkit import FakeSweep

from harness.analysis import decision, memory
from harness.cli import main

COUNTED = {"memory_reading": memory.memory_reading, "decide": decision.decide}


@pytest.fixture
def entered(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """How often each counted function was entered, through any module's name for it."""
    import harness.analysis.decision
    import harness.stages.measure
    import harness.stages.settle  # noqa: F401

    calls: Counter[str] = Counter()

    def counting(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return real(*args, **kwargs)
        return wrapper

    for name, real in COUNTED.items():
        wrapped = counting(name, real)
        for mod in [m for n, m in list(sys.modules.items()) if n.startswith("harness")]:
            if getattr(mod, name, None) is real:
                monkeypatch.setattr(mod, name, wrapped)
    yield calls


@pytest.mark.parametrize("mode", ["iterations", "max_iterations"])
def test_one_cell_is_decided_once_from_run_to_report(
        fake_sweep: FakeSweep, entered: Counter[str], mode: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN one leaking cell, no baseline, swept in either mode
    run = fake_sweep(["v1"], {"v1": Behaviour(leak_per_iter=16384)}, plan=True,
                     defaults={mode: 200, "warmup": 5, "sample_every": 5})
    (res,) = run.outcome.results.values()
    assert res.verdict == "leak", res.reason
    live_looks = entered["memory_reading"] - 1     # the live decider's looks, if any
    if mode == "iterations":
        assert live_looks == 0
    # THEN the run decided it once: one verdict, one reading of all its samples
    assert entered["decide"] == 1, entered
    # WHEN every reader of the results reads it
    before = Counter(entered)
    root = Path(run.store.root)
    for argv in (["report", str(root)], ["report", str(root), "--format", "md"],
                 ["report", str(root), "--format", "json"], ["history", str(root.parent),
                                                             "--no-html"]):
        main([*argv, "-q"])
    capsys.readouterr()
    # THEN none decides again: they read the stored verdict
    assert entered == before, entered - before


def test_a_row_with_a_baseline_decides_each_cell_once_more_against_it(
        fake_sweep: FakeSweep, entered: Counter[str]) -> None:
    # Two images, the second leaking: each cell's own reading once, and the second
    # cell's verdict once more with the baseline's facts (the row's comparison).
    run = fake_sweep(["v1", "v2"], {"v2": Behaviour(leak_per_iter=16384)}, plan=True)
    assert sorted(r.verdict for r in run.outcome.results.values()) == ["leak", "ok"]
    assert entered["memory_reading"] == 2, entered
    assert entered["decide"] == 2 + 1, entered
