"""A table of rules: each a `Rule` (id, what it does, when, the thresholds it reads, its
test over the table's evidence); the first that fires decides (`first_of`). The tables:
the verdict's (`rules.RULES`), a run's course (`runrules`: the live look, a re-run, a
confirmation round) and a source's memory kind (`trendrules`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar, cast, get_args

from harness.analysis.kinds import Verdict

E = TypeVar("E")


@dataclass(frozen=True)
class Rule(Generic[E]):
    """One rule: its id (kept in the result), what it decides (a verdict; in the tables
    of a run's course, `runrules`, what the run does; in `trendrules`, a memory kind),
    when, the thresholds it reads (names of `AnalysisConfig`), and its test over the
    table's evidence: what it names when it fires (a carrier, a source, the cell), else
    None."""

    id: str
    says: str
    when: str
    thresholds: tuple[str, ...]
    test: Callable[[E], str | None]
    memory: bool = False           # a rule of memory alone: the live decider's too

    @property
    def verdict(self) -> Verdict:
        """What a rule of the verdict's table decides, as a verdict."""
        if self.says not in get_args(Verdict):
            raise ValueError(f"rule {self.id} decides {self.says!r}, not a verdict")
        return cast(Verdict, self.says)


def first_of(ev: E, rules: tuple[Rule[E], ...]) -> tuple[Rule[E], str]:
    """The first rule of `rules` (a table, in order) that fires, and what it names."""
    for rule in rules:
        named = rule.test(ev)
        if named is not None:
            return rule, named
    raise AssertionError("the last rule always fires")
