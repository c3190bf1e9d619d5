"""The model of users' paths (tests/model/userpaths.py) run in CI: a fixed seed and a
bounded number of sequences, so the same paths are walked on every run. Measured on the
2-core development VM at load average 13: 35 sequences, 571 steps, 469 commands, 20 s
of CPU, 42 s wall (`pytest -s` prints the counts); with issue 42's rules (culprit, its
flag mistakes, a second matrix file of the same name, an edit then every command, the
issue draft) 36 sequences, 532 steps, 414 commands, 12.6 s wall, beside the walk before
them run just before on the same VM (load average 5): 35 sequences, 571 steps, 470
commands, 15.8 s; `benchmarks/user_paths.py` walks more of them."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test
from userpaths import UserPaths

SEQUENCES, STEPS = 30, 20


@pytest.mark.slow
def test_every_answer_holds_to_the_truth_along_users_paths() -> None:
    UserPaths.counts.clear()
    UserPaths.counts.update(sequences=0, steps=0, commands=0)
    run_state_machine_as_test(UserPaths, settings=settings(
        max_examples=SEQUENCES, stateful_step_count=STEPS, derandomize=True,
        deadline=None, suppress_health_check=list(HealthCheck), print_blob=False,
        report_multiple_bugs=False, phases=[Phase.explicit, Phase.generate]))
    # The walk is not empty: every sequence ran, and most steps ran a command.
    counts = UserPaths.counts
    print(f"user paths walked: {dict(sorted(counts.items()))}")     # seen with -s
    assert counts["sequences"] >= SEQUENCES, counts
    assert counts["commands"] >= SEQUENCES * STEPS // 3, counts
    # and it walked the paths the issue names: a Ctrl-C, a where gone stale, an explain
    assert counts.get("interrupted", 0) and counts.get("explained", 0), counts
    assert counts.get("stale where", 0), counts
    # and issue 42's: stale cells said as such, culprit's flag mistakes, a second file
    assert counts.get("stale cell", 0) and counts.get("culprit flag mistake", 0), counts
    assert counts.get("other matrix refused", 0), counts
