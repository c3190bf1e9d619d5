"""Which of the changes between a last good image G and a first bad B did it (pure).

Delta debugging (ddmin) by `probe(UNDO, s)` (B, `s` undone), `probe(APPLY, s)` (G, `s`
applied), each "good", "bad" or "untestable" (skipped), no probe twice:

1. B with every change undone still bad: not the packages (`OUTSIDE`).
2. ddmin undoing: the smallest U whose undoing makes B good.
3. G + U bad: U is proved both ways (`FOUND`), tightened to a smaller proved subset if any.
4. Else ddmin applying: X with G + U + X bad; then B without U + X must be good.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T", bound=Hashable)

UNDO = "undo"     # B with the set at G's versions
APPLY = "apply"   # G with the set at B's versions
GOOD, BAD, UNTESTABLE = "good", "bad", "untestable"
OUTCOMES = (GOOD, BAD, UNTESTABLE)

FOUND = "found"           # a set S: B minus S good and G plus S bad, both probed
OUTSIDE = "outside"       # B with every change undone is still bad
NOT_PROVED = "not-proved"  # a set fixes B, but no set of changes was shown to break G
NO_FIX = "no-fix"         # no undo of changes was seen good (untestable hybrids)
NO_CHANGES = "no-changes"  # nothing to swap


@dataclass(frozen=True)
class Probe(Generic[T]):
    side: str                  # UNDO or APPLY
    changes: tuple[T, ...]     # in the order of the change list
    outcome: str

    def describe(self, name: Callable[[T], str] = str) -> str:
        base = "B with" if self.side == UNDO else "G with"
        what = "undone" if self.side == UNDO else "applied"
        return f"{base} {', '.join(name(c) for c in self.changes)} {what}: {self.outcome}"


@dataclass
class Search(Generic[T]):
    """The answer and every probe that led to it, in the order they ran."""

    status: str
    answer: tuple[T, ...] = ()
    probes: list[Probe[T]] = field(default_factory=list)
    why: str = ""

    @property
    def found(self) -> bool:
        return self.status == FOUND

    def outcome_of(self, side: str, changes: Sequence[T]) -> str | None:
        want = frozenset(changes)
        for p in self.probes:
            if p.side == side and frozenset(p.changes) == want:
                return p.outcome
        return None


Prober = Callable[[str, tuple[T, ...]], str]


def expected_probes(n: int) -> int:
    """The most probes for one culprit among n without noise."""
    levels = (n - 1).bit_length()   # ceil(log2 n)
    return 2 + 2 * levels


def split(items: Sequence[T], n: int) -> list[tuple[T, ...]]:
    """`items` in n nearly equal consecutive parts (the first ones larger)."""
    size, extra = divmod(len(items), n)
    parts, at = [], 0
    for i in range(n):
        step = size + (1 if i < extra else 0)
        parts.append(tuple(items[at:at + step]))
        at += step
    return [p for p in parts if p]


class _Memo(Generic[T]):
    def __init__(self, probe: Prober[T], order: Sequence[T], out: Search[T]):
        self.probe, self.out = probe, out
        self.rank = {c: i for i, c in enumerate(order)}
        self.seen: dict[tuple[str, frozenset[T]], str] = {}

    def __call__(self, side: str, changes: Sequence[T]) -> str:
        key = (side, frozenset(changes))
        if key not in self.seen:
            ordered = tuple(sorted(set(changes), key=self.rank.__getitem__))
            outcome = self.probe(side, ordered)
            if outcome not in OUTCOMES:
                raise ValueError(f"a probe answered {outcome!r}; allowed values: "
                                 f"{', '.join(OUTCOMES)}")
            self.seen[key] = outcome
            self.out.probes.append(Probe(side, ordered, outcome))
        return self.seen[key]


def ddmin(items: Sequence[T], holds: Callable[[Sequence[T]], bool]) -> tuple[T, ...]:
    """The smallest subset of `items` found for which `holds`, by Zeller's ddmin; an
    untestable part simply does not hold."""
    current, n = tuple(items), 2
    while len(current) > 1:
        parts = split(current, n)
        pick = next((p for p in parts if holds(p)), None)
        if pick is not None:
            current, n = pick, 2
            continue
        if n > 2:
            comps = [tuple(c for c in current if c not in p) for p in parts]
            pick = next((c for c in comps if holds(c)), None)
            if pick is not None:
                current, n = pick, max(n - 1, 2)
                continue
        if n >= len(current):
            break
        n = min(2 * n, len(current))
    return current


def find_culprit(changes: Sequence[T], probe: Prober[T]) -> Search[T]:
    """The set of `changes` (G to B, each once, in order) that makes B bad, proved both ways
    by `probe` (see the module), or why none is named.

    Raises: ValueError: the probe answered something else, or a change is listed twice.
    """
    items = tuple(changes)
    if len(set(items)) != len(items):
        raise ValueError("each change once: the list names one twice")
    out: Search[T] = Search(NO_CHANGES)
    if not items:
        out.why = "G and B differ in no package: nothing to swap"
        return out
    test = _Memo(probe, items, out)
    first = test(UNDO, items)
    if first == BAD:
        out.status = OUTSIDE
        out.why = "B with every package change undone is still bad: the cause is outside them"
        return out

    def fixes(s: Sequence[T]) -> bool:
        return test(UNDO, s) == GOOD

    if first == UNTESTABLE and not any(fixes(p) for p in split(items, 2)):
        out.status = NO_FIX
        out.why = ("B with every change undone is untestable and neither half fixes it: "
                   "no hybrid was seen good")
        return out
    start = items if first == GOOD else next(p for p in split(items, 2) if fixes(p))
    undo = ddmin(start, fixes)
    applied = test(APPLY, undo)
    if applied == BAD:
        out.status, out.answer = FOUND, _tightened(undo, test)
        return out
    if applied == UNTESTABLE:
        # Growing the set would name an innocent change beside the culprit.
        out.status, out.answer = NOT_PROVED, undo
        out.why = "undoing them fixes B, but G with them applied is untestable"
        return out
    rest = tuple(c for c in items if c not in undo)

    def breaks(extra: Sequence[T]) -> bool:
        return test(APPLY, (*undo, *extra)) == BAD

    if not rest or not breaks(rest):
        out.status, out.answer = NOT_PROVED, undo
        out.why = (f"undoing them fixes B, but G with them applied is {applied}"
                   + ("" if not rest else f" and G with every change applied is "
                      f"{test(APPLY, items)}"))
        return out
    extra = ddmin(rest, breaks)
    both = tuple(c for c in items if c in set(undo) | set(extra))
    if test(APPLY, both) == BAD and test(UNDO, both) == GOOD:
        out.status, out.answer = FOUND, both
        return out
    out.status, out.answer = NOT_PROVED, both
    out.why = (f"G with them applied is {test(APPLY, both)}, B with them undone is "
               f"{test(UNDO, both)}")
    return out


def _tightened(found: tuple[T, ...], test: _Memo[T]) -> tuple[T, ...]:
    """A proved set, made smaller where a subset is proved both ways too (an untestable
    hybrid can leave an innocent change in ddmin's answer)."""
    if len(found) < 2:
        return found
    tight = ddmin(found, lambda s: test(APPLY, s) == BAD)
    if len(tight) < len(found) and test(UNDO, tight) == GOOD:
        return tight
    return found


def held_together(search: Search[T]) -> bool:
    """Whether the answer's changes were never held apart: every probe of only some of
    them was untestable."""
    answer = set(search.answer)
    parts = [p for p in search.probes if p.changes and set(p.changes) < answer]
    return len(answer) > 1 and bool(parts) and all(p.outcome == UNTESTABLE for p in parts)


def one_at_a_time(changes: Sequence[T], probe: Prober[T]) -> Search[T]:
    """The benchmark's baseline: undo each change alone, then apply the fixing ones."""
    items = tuple(changes)
    out: Search[T] = Search(NO_CHANGES)
    if not items:
        return out
    test = _Memo(probe, items, out)
    fixing = tuple(c for c in items if test(UNDO, (c,)) == GOOD)
    if not fixing:
        out.status, out.why = NO_FIX, "no single change undone fixes B"
        return out
    if test(APPLY, fixing) == BAD:
        out.status, out.answer = FOUND, fixing
    else:
        out.status, out.answer = NOT_PROVED, fixing
    return out
