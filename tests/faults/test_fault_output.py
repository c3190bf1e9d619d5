"""Hostile or broken agent output, read directly: bounded in memory and time, and every
record checked against schema 1 before anything downstream (verdicts, reports) sees it."""

from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path

import pytest

from harness.analysis.decision import within_run
from harness.protocol import ingest
from harness.protocol.ingest import parse_lines, read_samples
from harness.runtimes.base import RunOutcome
from harness.thresholds import AnalysisConfig

HEADER = {"type": "header", "schema": 1, "python": "3.11.2", "env": {}, "packages": {}}


def _line(rec: object) -> bytes:
    return json.dumps(rec).encode() + b"\n"


def _sample(i: int, **kw: object) -> dict[str, object]:
    return {"type": "sample", "i": i, "src": "step", "phase": "measure", "dt": [0.001],
            "rss": 1000 + i, "heap": 10, **kw}


def test_monster_line_without_newline_is_skipped_in_bounded_memory(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    with p.open("wb") as f:
        f.write(_line(HEADER))
        f.write(b"[" * (64 << 20))         # 64 MiB, no newline
    tracemalloc.start()
    t0 = time.process_time()       # this process's CPU: the host's load does not stretch it
    s = read_samples(p)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert time.process_time() - t0 < 5
    assert peak < 8 * ingest.MAX_LINE
    assert s.header is not None and "longer than" in s.problems[0]


def test_flood_stops_at_the_byte_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest, "MAX_TOTAL", 1 << 20)
    p = tmp_path / "s.jsonl"
    one = _line(_sample(1, dt=[0.001] * 5000))    # ~45 KiB of floats per line
    p.write_bytes(_line(HEADER) + one * 200)      # ~9 MiB
    s = read_samples(p)
    assert len(s.samples) <= 32  # 1 MiB of ~35 KiB lines
    assert any("the rest ignored" in x for x in s.problems)


def test_flood_stops_at_the_record_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest, "MAX_RECORDS", 1000)
    s = parse_lines([_line(HEADER)] + [_line(_sample(i)) for i in range(5000)])
    assert len(s.samples) == 1000
    assert "the rest ignored" in s.problems[-1]


@pytest.mark.parametrize("raw, problem", [
    (b"\xff\xfe\xfd\n", "not JSON"),
    (b'{"type": "sample", "i": 1\n', "not JSON"),
    (b"NaN\n", "not a JSON object"),
    (b'"just a string"\n', "not a JSON object"),
    (b'{"type": "evil"}\n', "unknown record type"),
    (_line(_sample(True)), "integer 'i'"),
    (_line(_sample(1, src="gpu")), "unknown 'src'"),
    (_line(_sample(1, phase=None)), "'phase'"),
    (_line(_sample(1, rss="1GB")), "'rss'"),
    (_line(_sample(1, heap=-1)), "'heap'"),
    (b'{"type":"sample","i":1,"src":"timer","phase":"measure","uss":Infinity}\n', "'uss'"),
    (_line(_sample(1, dt="fast")), "'dt'"),
    (_line(_sample(1, dt=[1, None])), "'dt'"),
    (_line(_sample(1, cpu={"a": 1})), "'cpu'"),
    (_line({"type": "end", "status": "pwned"}), "unknown status"),
])
def test_bad_records_are_problems(raw: bytes, problem: str) -> None:
    s = parse_lines([_line(HEADER), raw, _line(_sample(2))])
    assert [x["i"] for x in s.samples] == [2]
    assert problem in s.problems[0], s.problems


@pytest.mark.parametrize("end", [
    {"type": "end", "status": "error", "error": "<script>alert(1)</script>"},
    {"type": "end", "status": "error", "error": ["a"]},
    {"type": "end", "status": "error", "error": {"type": {"x": 1}, "message": [1]}},
    {"type": "end", "status": "ok", "info": "<b>", "phases": [1], "iterations": "many"},
])
def test_wrong_typed_end_fields_never_break_the_verdict(end: dict[str, object]) -> None:
    s = parse_lines([_line(HEADER)] + [_line(_sample(i)) for i in range(50)] + [_line(end)])
    assert s.end is not None
    v = within_run(s, RunOutcome(exit_code=1 if end["status"] == "error" else 0),
               AnalysisConfig())
    assert v.verdict in ("crash", "ambiguous", "ok", "leak", "plateau")


@pytest.mark.parametrize("bad", [{"env": ["CUDA_VERSION"]}, {"env": {"A": {"b": 1}}},
                                 {"packages": "numpy"}, {"gpu": {"devices": "x"}},
                                 {"gpu": ["x"]}, {"python": {"v": 3}}])
def test_wrong_typed_header_fields_are_dropped(bad: dict[str, object]) -> None:
    from harness.answers.search import fingerprint_diff

    s = parse_lines([_line({**HEADER, **bad})])
    assert s.header is not None
    assert not set(bad) & set(s.header)
    from tests.resultkit import as_result

    fp = {k: v for k in ("python", "env", "packages", "gpu") if (v := s.header.get(k))}
    # what is left loads as a typed fingerprint, and diffs
    fingerprint_diff(as_result({"fingerprint": fp}), as_result({"fingerprint": {}}))


def test_a_forged_end_mid_run_cannot_hide_a_crash() -> None:
    forged = {"type": "end", "status": "ok"}
    real = {"type": "end", "status": "error", "error": {"type": "RuntimeError"}}
    s = parse_lines([_line(HEADER), _line(_sample(1)), _line(forged), _line(_sample(2)),
                     _line(real)])
    v = within_run(s, RunOutcome(exit_code=1), AnalysisConfig())
    assert v.verdict == "crash"
    assert "sample after end ignored" in s.problems[0]


def test_local_log_tail_is_read_from_the_end(tmp_path: Path) -> None:
    from harness.runtimes.local import _tail

    log = tmp_path / "agent.log"
    log.write_bytes(b"x" * (32 << 20) + b"\nlast words")
    tracemalloc.start()
    tail = _tail(log, 8000)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert tail.endswith("last words") and len(tail) <= 8000
    assert peak < 1 << 20
