"""Issue 86 item 2's last case: an LRU cache of more entries than a marked test's first
run makes calls (5,000 entries of ~2 KB at ~0.1 ms a call: 4,600 calls in 0.5 s) read
`leak` at the default budget in 3 of 3 runs, "a cache would hold more than 9.29 MiB": rule
`short` spared runs under 2,000 calls (`short_calls`) alone, a guess at a cache's size.
Under an `overrun` bound (the plugin's 16 budgets) a run its budget ended runs again 4
times its calls where the bound leaves room (rule `length-fill`): the LRU reads `plateau`,
and a leak at the same pace and rate still reads `leak`, after the longer run.

The LRU's size is set from this machine's own pace (1.5x the calls the first run can make
in its budget), so it fills past the first run on any host, and within the bound."""

from __future__ import annotations

import sys
import textwrap
import timeit
from collections.abc import Iterator
from pathlib import Path

import pytest

import harness
from harness.analysis.decision import cut_short
from harness.analysis.runrules import LENGTH_RULES, LengthEvidence, fill_asks
from harness.analysis.table import first_of
from harness.protocol.ingest import Series
from harness.thresholds import AnalysisConfig

BUDGET_S = 0.5
STEPS = """
import functools

SIZE = {size}
KEPT = []
_N = [0]


@functools.lru_cache(maxsize=SIZE)
def _compiled(n):
    return bytes(2000) + str(n).encode()


def _work():
    return sum(range({work}))


def lru():
    _N[0] += 1
    _compiled(_N[0])
    _work()


def leak():
    KEPT.append(bytes(2000) + str(len(KEPT)).encode())
    _work()
"""


@pytest.fixture
def steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    monkeypatch.syspath_prepend(str(tmp_path))
    # ~0.1 ms of work a call on this machine, and an LRU half again as large as the calls
    # a budget of it holds
    work = 2000
    per = timeit.timeit(f"sum(range({work}))", number=2000) / 2000
    work = max(200, int(work * 1e-4 / per))
    per_call = timeit.timeit(f"sum(range({work}))", number=2000) / 2000
    size = int(1.5 * BUDGET_S / per_call)
    (tmp_path / "fillsteps.py").write_text(
        textwrap.dedent(STEPS.format(size=size, work=work)), encoding="utf-8")
    import fillsteps  # type: ignore[import-not-found]
    yield fillsteps
    sys.modules.pop("fillsteps", None)


def test_an_lru_larger_than_a_first_run_fills_within_the_bound_and_a_leak_still_fails(
        steps: object) -> None:
    bound = {"overrun": 16}
    lru = harness.check(steps.lru, budget=f"{BUDGET_S}s", settings=bound)  # type: ignore[attr-defined]
    leak = harness.check(steps.leak, budget=f"{BUDGET_S}s", settings=bound)  # type: ignore[attr-defined]
    # THEN the LRU, still filling when its first run ended, levels off in a longer one
    assert lru.verdict in ("plateau", "ok"), str(lru)
    assert lru.result.attempts[0].verdict == "ambiguous", lru.result.attempts
    assert "a cache of as many entries" in lru.result.attempts[0].reason
    # AND the leak at the same pace and rate fails, read past the calls the LRU needed
    assert (leak.verdict, leak.bad) == ("leak", True), str(leak)
    assert (leak.result.end.iterations or 0) > steps.SIZE, leak.result.attempts  # type: ignore[attr-defined]


def test_the_fill_rule_asks_for_room_under_a_bound_only() -> None:
    cfg = AnalysisConfig()
    said = "4,600 calls in its 0.5 s budget, 0.109 ms a call"

    def rule(room: int | None, done: int = 4600) -> str:
        ev = LengthEvidence(cfg, True, "", 9e6, said, done, 10**6, room)
        return first_of(ev, LENGTH_RULES)[0].id

    # a sweep's cell (no bound) reads its leak as it is; room for 4x its calls runs
    # again, less does not; a leak of `leak_large_bytes` stands whatever the room
    assert rule(None) == "length-enough"
    assert rule(4 * 4600) == "length-fill"
    assert rule(4 * 4600 - 1) == "length-enough"
    assert fill_asks(LengthEvidence(cfg, True, "", 9e6, said, 4600, 10**6, 10**6)) == 18400
    assert fill_asks(LengthEvidence(cfg, True, "", 9e6, said, 300, 10**6, 10**6)) == \
        cfg.short_calls
    assert first_of(LengthEvidence(cfg, True, "", cfg.leak_large_bytes, said, 4600, 10**6,
                                   10**6), LENGTH_RULES)[0].id == "length-large"
    # under 2,000 calls without room: rule `length-short`, as before
    assert rule(0, done=300) == "length-short"
    assert cut_short(Series(), cfg, True, "", 9e6, 10**6) is None   # no budget ended it
