"""The model of users' paths (tests/model/userpaths.py) run in CI: a fixed seed and a
bounded number of sequences, so the same paths are walked on every run. Measured on the
2-core development VM at load average 13: 35 sequences, 571 steps, 469 commands, 20 s
of CPU, 42 s wall (`pytest -s` prints the counts); with issue 42's rules (culprit, its
flag mistakes, a second matrix file of the same name, an edit then every command, the
issue draft) 36 sequences, 532 steps, 414 commands, 12.6 s wall, beside the walk before
them run just before on the same VM (load average 5): 35 sequences, 571 steps, 470
commands, 15.8 s; `benchmarks/user_paths.py` walks more of them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test
from userpaths import UserPaths

SEQUENCES, STEPS = 30, 20


class Newest:
    """`st.data()` on the fixed path below: each draw takes the newest of what it samples
    (the directory a user just made)."""

    def draw(self, strategy: Any, label: str | None = None) -> Any:
        return list(strategy.elements)[-1]


def walk_the_named_paths() -> None:
    """The paths the issues name, walked once in a fixed order before the random walk,
    each rule checking its answers as in the walk: which paths hypothesis's walk reaches
    depends on timing (a CI run under load walked no stale where and no culprit flag
    mistake), these do not."""
    m = UserPaths()
    try:
        m.sweep(None, explain=True)                   # an explained run
        m.nothing_written_outside()
        m.culprit(Newest(), "reversed")               # culprit's flag mistake, fix run
        m.repin_explained(Newest())                   # first bad repinned, resumed: stale
        m.sweep(2, explain=False)                     # Ctrl-C at the second cell
        m.other_matrix(Newest())                      # a second file of the same name
        m.edit("scenario", 0, 1)
        m.edit_then_each(Newest(), False)             # an edit, then every command
        m.nothing_written_outside()
    finally:
        m.teardown()


@pytest.mark.slow(seconds=35)
def test_every_answer_holds_to_the_truth_along_users_paths() -> None:
    UserPaths.counts.clear()
    UserPaths.counts.update(sequences=0, steps=0, commands=0)
    walk_the_named_paths()
    named = dict(UserPaths.counts)
    print(f"named paths walked: {dict(sorted(named.items()))}")     # seen with -s
    assert named.get("stale where", 0) and named.get("interrupted", 0), named
    assert named.get("culprit flag mistake", 0) and named.get("other matrix refused", 0), named
    assert named.get("stale cell", 0) and named.get("why of a stale cell", 0), named
    run_state_machine_as_test(UserPaths, settings=settings(
        max_examples=SEQUENCES, stateful_step_count=STEPS, derandomize=True,
        deadline=None, suppress_health_check=list(HealthCheck), print_blob=False,
        report_multiple_bugs=False, phases=[Phase.explicit, Phase.generate]))
    # The walk is not empty: every sequence ran, and most steps ran a command.
    counts = {k: v - named.get(k, 0) for k, v in UserPaths.counts.items()}
    print(f"user paths walked: {dict(sorted(counts.items()))}")     # seen with -s
    assert counts["sequences"] >= SEQUENCES, counts
    assert counts["commands"] >= SEQUENCES * STEPS // 3, counts
    # and it varied them: Ctrl-Cs, explains, stale cells (the issues' named paths are
    # held above, on the fixed path, where timing cannot steer the walk off them)
    assert counts.get("interrupted", 0) and counts.get("explained", 0), counts
    assert counts.get("stale cell", 0), counts
