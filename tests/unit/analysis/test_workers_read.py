"""Issue 78 point 2: an `ok` stands only where every memory source that exists was read
flat enough times. A pool's workers read 8 times on a busy host were dropped, and the
cell read `ok` while they grew ~195 KiB a call; now too few readings of the workers, or
readings that neither grow nor stay flat, leave the cell undecided, naming them."""

from __future__ import annotations

import pytest

from harness.analysis.records import MemoryKind, MemoryTrend
from harness.analysis.rules import Evidence, first_rule, memory_rule


def trend(source: str, kind: MemoryKind, n: int = 120, slope: float = 0.0,
          creep: bool = False) -> MemoryTrend:
    return MemoryTrend(source, n, slope, slope - 5, slope + 5, slope * 1000, slope,
                       slope - 5, slope + 5, 1e7, 1e7 + slope * 1000, 1e7 + slope * 1000,
                       kind, floor=65536.0, creep=creep)


def flat() -> dict[str, MemoryTrend]:
    return {s: trend(s, "stable") for s in ("heap", "uss", "rss")}


def test_the_parents_memory_flat_and_no_workers_is_ok() -> None:
    rule, named = first_rule(Evidence(flat()))
    assert (rule.id, rule.verdict, named) == ("ok", "ok", "heap")


def test_workers_read_flat_enough_times_is_ok() -> None:
    rule, _ = first_rule(Evidence({**flat(), "kids": trend("kids", "stable")}))
    assert rule.verdict == "ok"


@pytest.mark.parametrize(("kind", "creep", "rule_id"), [
    ("insufficient", False, "insufficient"),   # read 8 times: too few to call flat
    ("ambiguous", True, "creep"),              # growing steadily, under the floors yet
    ("ambiguous", False, "unsure"),            # neither growing nor flat
])
def test_workers_not_read_flat_leave_the_cell_undecided(kind: MemoryKind, creep: bool,
                                                         rule_id: str) -> None:
    # GIVEN the parent's memory flat and the workers' not read flat
    ev = Evidence({**flat(), "kids": trend("kids", kind, n=8, creep=creep)})
    # THEN the cell is not ok: undecided, naming the workers
    rule, named = first_rule(ev)
    assert (rule.id, rule.verdict, named) == (rule_id, "ambiguous", "kids")
    assert memory_rule(ev)[0].id == rule_id


def test_the_words_name_the_workers_and_what_would_decide() -> None:
    from harness.analysis.memory import reading_of
    from harness.protocol.series import Series

    memory = {**flat(), "kids": trend("kids", "insufficient", n=8)}
    reading = reading_of(memory, {}, Series())
    assert reading.kind == "insufficient" and reading.carrier == "kids"
    assert "worker processes' memory read 8 times" in reading.reason
    assert "running it again" in reading.reason
