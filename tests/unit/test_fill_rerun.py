"""A cell whose growth a filling cache could still explain runs again as its reason
says (issue 37): `FILL_RERUN` times longer, and the run that settles it stands."""

from __future__ import annotations

import json
from pathlib import Path

from fakeruntime import Behaviour, FakeRuntime

from harness import matrixfile
from harness.stages.orchestrator import sweep
from harness.store import RunStore

MATRIX = """\
name: fill
runtime: local
defaults: {{iterations: 600, warmup: 20, sample_every: 10, repeats: {repeats}}}
matrix:
  image: [{{name: v1}}]
  gpu: [0]
  scenario: [loop.py]
"""


def swept(tmp_path: Path, repeats: int) -> dict[str, object]:
    (tmp_path / "loop.py").write_text("def setup(params):\n    return None\n\n\n"
                                      "def step(state):\n    pass\n")
    path = tmp_path / "matrix.yaml"
    path.write_text(MATRIX.format(repeats=repeats))
    matrix = matrixfile.load(path)
    # The heap grows 1 KiB/call, read with 5 KiB of jitter (a heap like the H100's), RSS
    # and USS 2 KiB/call with 32 KiB
    runtime = FakeRuntime(lambda cell: Behaviour(leak_per_iter=2048.0, heap_noise=5120.0,
                                                 noise=32768.0))
    store = RunStore.open(tmp_path / "reports", matrix.name, False)
    try:
        sweep(matrix, list(matrix.cells), runtime, store, lambda _: None, False)
    finally:
        store.unlock()
    (result,) = (store.root / "cells").glob("*/result.json")
    data: dict[str, object] = json.loads(result.read_text())
    return data


def test_growth_a_fill_could_be_runs_again_four_times_longer_and_is_then_a_leak(
        tmp_path: Path) -> None:
    data = swept(tmp_path, repeats=2)
    attempts = data["attempts"]
    assert isinstance(attempts, list)
    first = attempts[0]
    # GIVEN +600 KiB over 600 calls on a 100 MB heap: ambiguous, the run again named
    assert first["verdict"] == "ambiguous" and first["iterations"] == 600, first
    assert first["reason"].endswith("over 600 calls: a leak or a cache still filling; "
                                    "running it again for 2,400"), first
    # THEN the next run is the 2,400 calls it named, and that one settles it: a leak
    assert attempts[1]["iterations"] == 2400, attempts
    assert data["verdict"] == "leak", data["reason"]


def test_with_its_repeats_spent_the_reason_does_not_promise_a_run(tmp_path: Path) -> None:
    data = swept(tmp_path, repeats=0)
    assert data["verdict"] == "ambiguous", data["reason"]
    assert str(data["reason"]).endswith(
        "a leak or a cache still filling; a run of 2,400 calls would tell (it runs no "
        "more: its repeats are spent or --iterations bounds it)"), data["reason"]
