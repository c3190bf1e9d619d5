"""Issue 61 point 1: the memory of the agent's worker processes (a multiprocessing pool's,
a DataLoader's with num_workers > 0) is a source of its own, `kids` (the USS summed over
every process below the agent): a worker that keeps 4 KiB a call while the caller stays
flat is a leak, not "ok: no leak above 137 B/call"; a worker that fills a bounded cache
is not one; and an `ok` says the bound it holds for the workers where they were read."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fakeruntime import Behaviour

from harness.analysis.records import LiveDecision
from harness.analysis.sequential import LiveDecider
from harness.protocol.ingest import SeriesReader
from harness.thresholds import AnalysisConfig

DEFAULTS = {"iterations": 600, "warmup": 10, "sample_every": 5, "repeats": 0}


@pytest.fixture
def verdicts(fake_sweep: Any) -> dict[str, tuple[str, str]]:
    table = {"flat": Behaviour(kids_leak_per_iter=0.0),
             "leaks": Behaviour(kids_leak_per_iter=4096.0),
             "cache": Behaviour(kids_leak_per_iter=40_000.0, kids_until=100),
             "none": Behaviour()}
    run = fake_sweep(list(table), table, gpus=None, defaults=DEFAULTS)
    return {cid.split(".")[0]: (r.verdict, r.reason) for cid, r in run.results.items()}


def test_a_worker_that_keeps_4_kib_a_call_is_a_leak(
        verdicts: dict[str, tuple[str, str]]) -> None:
    # GIVEN a caller whose own memory is flat, and a worker that grows 4 KiB a call
    verdict, reason = verdicts["leaks"]
    # THEN the cell leaks, and the reason names the workers' memory and its rate
    assert verdict == "leak", reason
    assert reason.startswith("workers grow +4.0 KiB/call"), reason


def test_a_worker_filling_a_bounded_cache_is_no_leak(
        verdicts: dict[str, tuple[str, str]]) -> None:
    # GIVEN a worker that grows 40 KB a call for 100 calls, then stays
    verdict, reason = verdicts["cache"]
    # THEN it levelled off: never a leak
    assert verdict in ("plateau", "ok"), reason
    assert verdict == "plateau" and reason.startswith("workers grew"), reason


def test_an_ok_says_its_bound_for_the_workers_only_where_they_were_read(
        verdicts: dict[str, tuple[str, str]]) -> None:
    verdict, reason = verdicts["flat"]
    assert verdict == "ok", reason
    assert "; worker processes: no leak above " in reason, reason
    # a cell without workers says nothing of them
    verdict, reason = verdicts["none"]
    assert verdict == "ok" and "no leak above" in reason, reason
    assert "worker" not in reason, reason


def live(kids_in_setup: bool, kids_per_call: float | None) -> LiveDecision | None:
    """The first live decision on a flat caller (heap, USS, RSS), with the workers' USS
    read at setup where `kids_in_setup`, and in the measured phase (every 10 calls,
    growing `kids_per_call`) unless None."""
    kids = {"kids": 3e7} if kids_in_setup else {}
    recs: list[dict[str, Any]] = [
        {"type": "header", "schema": 1, "config": {"warmup": 50}},
        {"type": "sample", "src": "step", "phase": "setup", "i": 0, "heap": 5e6, **kids},
        {"type": "sample", "src": "step", "phase": "warmup", "i": 50, "heap": 5e6,
         "uss": 4e8, "rss": 5e8}]
    for k in range(1, 201):
        rec = {"type": "sample", "src": "step", "phase": "measure", "i": 50 + 10 * k,
               "heap": 5e6 + (k % 3) * 100, "uss": 4e8, "rss": 5e8}
        if kids_per_call is not None:
            rec["kids"] = 3e7 + kids_per_call * 10 * k
        recs.append(rec)
    reader = SeriesReader()
    decider = LiveDecider(AnalysisConfig(leak_large_bytes=1), 50, 3000)
    for r in recs:
        record = reader.feed((json.dumps(r) + "\n").encode())
        got = decider.feed(record) if record is not None else None
        if got is not None:
            return got
    return None


def test_a_live_look_stops_ok_only_once_the_workers_are_read_flat() -> None:
    # GIVEN a caller whose memory is flat from the first measured call
    # THEN without workers a live look stops it `ok`
    got = live(kids_in_setup=False, kids_per_call=None)
    assert got is not None and got.verdict == "stable", got
    # BUT with workers seen at setup and not read since, it runs on
    assert live(kids_in_setup=True, kids_per_call=None) is None
    # AND read flat, the workers are needed too: a stable decision still comes
    got = live(kids_in_setup=True, kids_per_call=0.0)
    assert got is not None and got.verdict == "stable", got
    assert "worker processes: no leak above" in got.reason, got.reason
    # AND growing 4 KiB a call, they leak
    got = live(kids_in_setup=True, kids_per_call=4096.0)
    assert got is not None and got.verdict == "leak" and got.source == "kids", got
