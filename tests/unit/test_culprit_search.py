"""The culprit search (pure): ddmin over stated truths, counted probe by probe."""

from __future__ import annotations

from collections.abc import Callable, Collection

import pytest

from harness.culprit.search import (
    APPLY,
    BAD,
    FOUND,
    GOOD,
    NO_CHANGES,
    NO_FIX,
    NOT_PROVED,
    OUTSIDE,
    UNDO,
    UNTESTABLE,
    expected_probes,
    find_culprit,
    one_at_a_time,
    split,
)

Truth = Callable[[frozenset[str]], bool]   # the set of changes at B's version -> bad?


def prober(names: list[str], bad: Truth, untestable: Collection[tuple[str, frozenset[str]]] = ()
           ) -> tuple[Callable[[str, tuple[str, ...]], str], list[tuple[str, frozenset[str]]]]:
    """A probe over a stated truth: a hybrid is bad where `bad` says of the changes it
    carries at B's version; the listed hybrids cannot be run."""
    asked: list[tuple[str, frozenset[str]]] = []

    def probe(side: str, changes: tuple[str, ...]) -> str:
        key = (side, frozenset(changes))
        asked.append(key)
        if key in untestable:
            return UNTESTABLE
        at_b = frozenset(names) - set(changes) if side == UNDO else frozenset(changes)
        return BAD if bad(at_b) else GOOD

    return probe, asked


def names_of(n: int) -> list[str]:
    return [f"pkg{i:02d}" for i in range(n)]


@pytest.mark.parametrize("n", [1, 2, 8, 40])
def test_one_culprit_among_n_in_about_two_log2_n_probes(n: int) -> None:
    names = names_of(n)
    for culprit in names:
        def bad(s: frozenset[str], c: str = culprit) -> bool:
            return c in s

        probe, asked = prober(names, bad)
        found = find_culprit(names, probe)
        assert found.status == FOUND, (n, culprit, found.why)
        assert found.answer == (culprit,)
        assert len(asked) == len(set(asked)) == len(found.probes)   # none twice
        assert len(asked) <= expected_probes(n), (n, culprit, len(asked))
        # proved both ways: both probes ran and said so
        assert found.outcome_of(UNDO, [culprit]) == GOOD
        assert found.outcome_of(APPLY, [culprit]) == BAD


def test_expected_probes_is_two_per_halving() -> None:
    assert [expected_probes(n) for n in (1, 2, 8, 40)] == [2, 4, 8, 14]


def test_a_pair_that_only_matters_together_is_named_as_a_pair() -> None:
    # GIVEN B is bad only when pkg03 and pkg06 are both at B's versions
    names = names_of(8)
    probe, _ = prober(names, lambda s: {"pkg03", "pkg06"} <= s)
    found = find_culprit(names, probe)
    assert found.status == FOUND
    assert found.answer == ("pkg03", "pkg06")
    assert found.outcome_of(UNDO, ["pkg03", "pkg06"]) == GOOD
    assert found.outcome_of(APPLY, ["pkg03", "pkg06"]) == BAD


def test_either_of_two_is_enough_names_both() -> None:
    names = names_of(8)
    probe, _ = prober(names, lambda s: bool({"pkg01", "pkg05"} & s))
    found = find_culprit(names, probe)
    assert found.status == FOUND and found.answer == ("pkg01", "pkg05")


def test_an_untestable_hybrid_is_skipped_never_counted() -> None:
    # GIVEN the first half undone cannot be built (a version conflict)
    names = names_of(8)
    half = frozenset(names[:4])
    probe, _ = prober(names, lambda s: "pkg02" in s, untestable={(UNDO, half)})
    found = find_culprit(names, probe)
    assert found.status == FOUND and found.answer == ("pkg02",)
    assert found.outcome_of(UNDO, names[:4]) == UNTESTABLE


def test_an_untestable_culprit_is_never_named() -> None:
    names = names_of(4)
    probe, _ = prober(names, lambda s: "pkg01" in s, untestable={(APPLY, frozenset({"pkg01"}))})
    found = find_culprit(names, probe)
    assert found.status != FOUND
    assert found.status == NOT_PROVED and found.answer == ("pkg01",)
    assert "untestable" in found.why


def test_cause_outside_the_packages() -> None:
    names = names_of(5)
    probe, asked = prober(names, lambda s: True)   # bad whatever the packages
    found = find_culprit(names, probe)
    assert found.status == OUTSIDE and found.answer == ()
    assert asked == [(UNDO, frozenset(names))]


def test_nothing_fixes_when_every_hybrid_is_untestable() -> None:
    names = names_of(4)
    every = {(UNDO, frozenset(p)) for p in [names, *split(names, 2)]}
    probe, _ = prober(names, lambda s: "pkg00" in s, untestable=every)
    assert find_culprit(names, probe).status == NO_FIX


def test_no_changes_and_bad_input() -> None:
    probe, asked = prober([], lambda s: True)
    assert find_culprit([], probe).status == NO_CHANGES and not asked
    with pytest.raises(ValueError, match="twice"):
        find_culprit(["a", "a"], probe)
    with pytest.raises(ValueError, match="allowed values"):
        find_culprit(["a"], lambda side, s: "leak")


def test_one_at_a_time_costs_n_plus_one() -> None:
    names = names_of(8)
    probe, asked = prober(names, lambda s: "pkg07" in s)
    found = one_at_a_time(names, probe)
    assert found.status == FOUND and found.answer == ("pkg07",)
    assert len(asked) == 9


def test_split_keeps_order_and_everything() -> None:
    items = names_of(7)
    for n in range(1, 8):
        parts = split(items, n)
        assert [x for p in parts for x in p] == items
        assert max(map(len, parts)) - min(map(len, parts)) <= 1
