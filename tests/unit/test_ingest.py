"""Tolerant reading of agent JSON lines: a cell that died mid-way still has a series."""

from __future__ import annotations

import json
import random
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakeruntime import step_times as as_written

from harness.protocol import ingest
from harness.protocol.ingest import MAX_LINE, SeriesReader, parse_lines, read_samples
from harness.protocol.series import readings, step_times

HEADER: dict[str, Any] = {"type": "header", "schema": 1, "python": "3.8.10"}


def sample(i: int, dt: list[float] | None = None, phase: str = "measure", src: str = "step",
           **extra: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {"type": "sample", "src": src, "phase": phase, "i": i, "t": i * 0.001,
                           "rss": 1000 + i, "uss": 900 + i, "heap": 500 + 2 * i}
    if src == "step":
        rec["dt"] = dt if dt is not None else [0.001, 0.002]
    rec.update(extra)
    return rec


END: dict[str, Any] = {"type": "end", "status": "ok", "iterations": 4}


def lines(*records: Any) -> list[bytes]:
    out = []
    for r in records:
        out.append(r if isinstance(r, bytes) else (json.dumps(r) + "\n").encode())
    return out


def write(path: Path, *records: Any) -> Path:
    path.write_bytes(b"".join(lines(*records)))
    return path


def test_a_clean_file(tmp_path: Path) -> None:
    # GIVEN header, a warm-up sample, two measured samples, a timer sample, an end
    path = write(tmp_path / "s.jsonl", HEADER, sample(2, phase="warmup", dt=[9.0, 9.0]),
                 sample(4, [0.001, 0.002]), sample(5, src="timer"), sample(6, [0.003, 0.004]), END)
    # WHEN it is read
    s = read_samples(path)
    # THEN nothing is a problem; step times come from measured step samples, memory
    # from measured step and timer samples (the timer thread reads USS)
    assert s.problems == [] and s.skipped == 0
    assert s.header is not None and s.header["python"] == "3.8.10"
    assert s.end == END
    np.testing.assert_array_equal(s.cols.steps, [0.001, 0.002, 0.003, 0.004])
    x, y = s.memory("heap")
    np.testing.assert_array_equal(x, [4, 5, 6])
    np.testing.assert_array_equal(y, [508, 510, 512])
    xw, _ = s.memory("rss", phase="warmup")
    np.testing.assert_array_equal(xw, [2])
    assert s.measured == 4
    assert s.cols.peaks.get("rss") == 1006
    assert s.memory("gpu_used")[0].size == 0
    assert s.cols.peaks.get("fw") is None


def test_the_lists_the_plots_read_are_the_columns_arrays() -> None:
    """`readings` and `step_times` (the report's plots, without NumPy) hold what
    `Columns.memory` and `Columns.steps` hold: measured phase only, by iteration, ints
    read as floats, whatever order the samples came in."""
    # GIVEN warm-up, measured step and timer samples out of order, an integer dt, a
    # sample without a heap reading
    recs = [sample(2, phase="warmup", dt=[9.0]), sample(8, [3, 0.5]), sample(5, src="timer"),
            sample(4, [0.001, 0.002]), sample(6, [0.004], heap=None), sample(7, [])]
    s = parse_lines(lines(HEADER, *recs, END))
    # THEN each list is the array's values, in the array's order
    assert step_times(s.samples) == s.cols.steps.tolist() == [3.0, 0.5, 0.001, 0.002, 0.004]
    for key in ("heap", "rss", "uss"):
        xs, ys = readings(s.samples, key)
        mx, my = s.cols.memory[key]
        assert (xs, ys) == (mx.tolist(), my.tolist()), key
    assert readings(s.samples, "heap")[0] == [4.0, 5.0, 7.0, 8.0]
    assert readings(s.samples, "rss", "warmup") == ([2.0], [1002.0])


def test_truncated_last_line(tmp_path: Path) -> None:
    # GIVEN the agent was killed in the middle of writing a sample
    partial = (json.dumps(sample(6)) + "\n").encode()[:25]
    path = write(tmp_path / "s.jsonl", HEADER, sample(4), partial)
    s = read_samples(path)
    # THEN the complete records are kept, the fragment is one problem, there is no end
    assert len(s.samples) == 1
    assert s.end is None
    assert s.skipped == 1
    assert "line 3" in s.problems[0] and "truncated" in s.problems[0]
    np.testing.assert_array_equal(s.cols.steps, [0.001, 0.002])


def test_garbage_lines_are_skipped() -> None:
    s = parse_lines(lines(b"Segmentation fault (core dumped)\n", HEADER, b"[1, 2]\n", b"\n",
                          b"   \n", b'"text"\n', sample(4), b"{\"type\": \"bogus\"}\n", END))
    assert len(s.samples) == 1
    assert s.end is not None and s.header is not None
    assert s.skipped == 4
    assert any("not JSON" in p for p in s.problems)
    assert any("not a JSON object" in p for p in s.problems)
    assert any("unknown record type 'bogus'" in p for p in s.problems)


def test_invalid_utf8() -> None:
    s = parse_lines(lines(HEADER, b'{"type": "sample", "note": "\xff\xfe"}\n', sample(4), END))
    assert len(s.samples) == 1
    assert s.skipped == 1
    assert "line 2" in s.problems[0]


def test_a_5mb_line_is_skipped_with_bounded_memory(tmp_path: Path) -> None:
    # GIVEN a 5 MB line (e.g. a runaway print) between good records, no newline inside
    monster = b'{"type": "sample", "junk": "' + b"x" * (5 * 1024 * 1024) + b'"}\n'
    path = write(tmp_path / "s.jsonl", HEADER, sample(4), monster, sample(6), END)
    # WHEN it is read, tracing Python allocations
    tracemalloc.start()
    try:
        s = read_samples(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # THEN it is skipped, the records after it are kept, and it was never held whole
    assert [r["i"] for r in s.samples] == [4, 6]
    assert s.end is not None
    assert s.skipped == 1
    assert f"longer than {MAX_LINE} bytes" in s.problems[0]
    assert peak < 4.5 * MAX_LINE < len(monster)  # ~4 MiB of read buffers, whatever the line


def test_a_long_last_line_without_newline(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", HEADER, sample(4), b"y" * (3 * MAX_LINE))
    s = read_samples(path)
    assert len(s.samples) == 1
    assert s.skipped == 1


def test_bytes_fed_in_any_chunks_give_the_series_read_from_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN good records, garbage, over-long lines (MAX_LINE made 200 bytes) and a last
    # line without its newline
    monkeypatch.setattr(ingest, "MAX_LINE", 200)
    long = b'{"type": "sample", "junk": "' + b"x" * 500 + b'"}\n'
    path = write(tmp_path / "s.jsonl", HEADER, sample(2), b"garbage\n", long, sample(4),
                 b"\n", b"y" * 199 + b"\n", b"z" * 200 + b"\n", sample(6), END,
                 b'{"type": "sample", "i"')
    data = path.read_bytes()
    want = read_samples(path)
    assert [r["i"] for r in want.samples] == [2, 4, 6] and want.end is not None
    assert want.skipped == 5 and "line 11: not JSON" in want.problems[-1]
    rng = random.Random(3)
    for size in (1, 2, 7, 199, 200, 201, 4096, None):
        # WHEN the same bytes reach a reader in chunks of that size (None: random sizes)
        reader, pos, kept = SeriesReader(), 0, []
        while pos < len(data):
            step = size or rng.randint(1, 300)
            kept += list(reader.feed_bytes(data[pos:pos + step]))
            pos += step
        # THEN the Series is the file's, and each kept record is the Series' own dict
        got = reader.finish()
        assert got == want, size
        assert [r.kind for r in kept] == ["header", "sample", "sample", "sample", "end"]
        assert [r.line for r in kept] == [1, 2, 5, 9, 10]
        assert kept[3].fields is got.samples[2] and kept[4].fields is got.end


def test_lines_the_caller_does_not_iterate_over_are_read_later() -> None:
    reader = SeriesReader()
    chunk = b"".join(lines(HEADER, sample(2), sample(4)))
    first = next(reader.feed_bytes(chunk))     # the caller stops after one record
    assert first.kind == "header"
    rest = list(reader.feed_bytes(b"".join(lines(sample(6), END))))
    assert [r.fields["i"] for r in rest if r.kind == "sample"] == [2, 4, 6]
    s = reader.finish()
    assert len(s.samples) == 3 and s.end == END and reader.finish() is s


@pytest.mark.parametrize(("change", "why"), [
    ({"rss": "1000"}, "'rss' is not a non-negative number"),
    ({"heap": -5}, "'heap' is not a non-negative number"),
    ({"uss": True}, "'uss' is not a non-negative number"),
    ({"t": float("nan")}, "'t' is not a non-negative number"),
    ({"dt": [0.001, -0.5]}, "'dt' is not a list of non-negative numbers"),
    ({"dt": "0.001"}, "'dt' is not a list"),
    ({"dt": [0.001, None]}, "'dt' is not a list"),
    ({"dt": [0.001, float("nan")]}, "'dt' is not a list of non-negative numbers"),
    ({"dt": [float("inf"), 0.001]}, "'dt' is not a list of non-negative numbers"),
    ({"dt": [0.001, True]}, "'dt' is not a list of non-negative numbers"),
    ({"dt": [-1, 2]}, "'dt' is not a list of non-negative numbers"),
    ({"dt_ns": [1000, -1]}, "'dt_ns' is not a list of non-negative integers"),
    ({"dt_ns": [1000, 1.5]}, "'dt_ns' is not a list of non-negative integers"),
    ({"dt_ns": [1000, True]}, "'dt_ns' is not a list of non-negative integers"),
    ({"dt_ns": "1000"}, "'dt_ns' is not a list of non-negative integers"),
    ({"dt_b64": as_written([0.001, -0.5])}, "'dt_b64' is not base64 of non-negative float64"),
    ({"dt_b64": as_written([0.001, float("nan")])}, "'dt_b64' is not base64 of non-negative"),
    ({"dt_b64": as_written([float("inf")])}, "'dt_b64' is not base64 of non-negative"),
    ({"dt_b64": as_written([0.001])[:-4]}, "'dt_b64' is not base64 of non-negative"),
    ({"dt_b64": "not base64!"}, "'dt_b64' is not base64 of non-negative"),
    ({"dt_b64": [1000]}, "'dt_b64' is not base64 of non-negative"),
    ({"i": "4"}, "without integer 'i'"),
    ({"i": True}, "without integer 'i'"),
    ({"src": "gpu"}, "unknown 'src'"),
    ({"phase": None}, "without 'phase'"),
])
def test_wrongly_typed_samples_are_skipped(change: dict[str, Any], why: str) -> None:
    bad = sample(4)
    bad.update(change)
    s = parse_lines(lines(HEADER, bad, sample(6, [0.5]), END))
    assert [r["i"] for r in s.samples] == [6]
    assert s.skipped == 1
    assert why in s.problems[0]
    np.testing.assert_array_equal(s.cols.steps, [0.5])


def test_integer_dt_becomes_float() -> None:
    s = parse_lines(lines(HEADER, sample(4, [1, 2]), END))
    assert s.cols.steps.dtype == np.float64
    np.testing.assert_array_equal(s.cols.steps, [1.0, 2.0])


def test_whole_ns_step_times_read_as_seconds_in_place_of_dt() -> None:
    # GIVEN this agent's step times in whole ns (older agents and recordings: `dt`, s)
    ns = {**sample(4), "dt_ns": [1500, 2_000_000_000, 0]}
    del ns["dt"]
    s = parse_lines(lines(HEADER, ns, sample(6, [0.25]), END))
    # THEN both read as seconds, one column
    np.testing.assert_array_equal(s.cols.steps, [1.5e-6, 2.0, 0.0, 0.25])
    assert "dt_ns" not in s.samples[0] and s.skipped == 0


def test_base64_step_times_read_as_seconds_in_place_of_dt() -> None:
    # GIVEN this agent's step times, float64 seconds in base64 (`agent.writer.step_times`)
    b64 = {**sample(4), "dt_b64": as_written([1.5e-6, 2.0, 0.0])}
    del b64["dt"]
    s = parse_lines(lines(HEADER, b64, sample(6, [0.25]), END))
    # THEN they read as seconds, one column with older agents' `dt`
    np.testing.assert_array_equal(s.cols.steps, [1.5e-6, 2.0, 0.0, 0.25])
    assert "dt_b64" not in s.samples[0] and s.skipped == 0


def test_second_header_is_ignored() -> None:
    s = parse_lines(lines(HEADER, sample(4), {**HEADER, "python": "3.12.0"}, END))
    assert s.header is not None and s.header["python"] == "3.8.10"
    assert s.problems == ["line 3: second header ignored"]


def test_unknown_schema_header() -> None:
    s = parse_lines(lines({**HEADER, "schema": 2}, sample(4), END))
    assert s.header is None
    assert "unknown schema 2" in s.problems[0]


def test_sample_after_end_is_ignored() -> None:
    s = parse_lines(lines(HEADER, sample(4), END, sample(6)))
    assert [r["i"] for r in s.samples] == [4]
    assert s.problems == ["line 4: sample after end ignored"]


def test_a_fake_second_end_is_ignored() -> None:
    # GIVEN a scenario that prints its own "end" after the agent's (e.g. echoed output)
    fake = {"type": "end", "status": "ok", "iterations": 999999}
    s = parse_lines(lines(HEADER, sample(4), END, fake))
    assert s.end == END
    assert s.problems == ["line 4: second end ignored"]


def test_end_with_unknown_status() -> None:
    s = parse_lines(lines(HEADER, sample(4), {"type": "end", "status": "done"}))
    assert s.end is None
    assert "unknown status" in s.problems[0]


def test_missing_file(tmp_path: Path) -> None:
    s = read_samples(tmp_path / "nope.jsonl")
    assert s.header is None and s.end is None and s.samples == []
    assert s.problems == ["no samples file: the agent never started"]
    assert s.cols.steps.size == 0
    assert s.memory("rss")[0].size == 0
    assert s.measured == 0


def test_problems_are_capped_but_counted() -> None:
    s = parse_lines([b"garbage\n"] * 100)
    assert s.skipped == 100
    assert len(s.problems) == 20


def test_contention_fields_are_read_per_step_sample() -> None:
    s = parse_lines(lines(HEADER, sample(2, rq_s=0.0005, ivcs=3, thr_s=0, thr_n=0),
                          sample(4, rq_s=0.001, ivcs=1), END))
    cols = s.cols.contention
    assert cols is not None
    np.testing.assert_allclose(cols["rq_s"], [0.0005, 0.001])
    np.testing.assert_allclose(cols["steps"], [2, 2])
    assert cols["thr_s"][0] == 0.0 and np.isnan(cols["thr_s"][1])


def test_an_interval_the_delay_took_whole_is_not_a_step_time_of_0() -> None:
    """CI46 beside two busy loops: cv2's 20-call run read its own step time as 0 (each
    interval's run-queue delay passed its steps' time, clamped at 0), and the seed test
    comparing it with skimage's divided by zero. Such an interval's own time is unknown:
    the median is the other intervals', and None where none is left."""
    def own(*rq: float) -> float | None:
        return parse_lines(lines(HEADER, *(sample(2 * (k + 1), dt=[0.001, 0.001], rq_s=r)
                                           for k, r in enumerate(rq)), END)).cols.own_step
    assert own(0.0005, 0.0005) == pytest.approx(0.00075)
    assert own(0.0005, 0.0025, 0.003) == pytest.approx(0.00075)
    assert own(0.002, 0.0025) is None
    # the --as-user calls' own time alike

    def user(*rq: float) -> tuple[int, float | None] | None:
        return parse_lines(lines(HEADER, sample(2), *(
            {"type": "sample", "src": "user", "phase": "user", "i": 100 * (k + 1),
             "t": 1.0 + k, "steps": 100, "dt_s": 0.1, "rq_s": r}
            for k, r in enumerate(rq)), END)).as_user()
    assert user(0.05, 0.05) == (200, pytest.approx(0.0005))
    assert user(0.05, 0.1, 0.2) == (300, pytest.approx(0.0005))
    assert user(0.1, 0.2) == (200, None)


def test_recordings_without_contention_still_load() -> None:
    s = parse_lines(lines(HEADER, sample(2), sample(4, cpu_s=0.002), END))
    assert s.cols.contention is None and len(s.samples) == 2 and not s.problems


@pytest.mark.parametrize(("change", "why"), [
    ({"rq_s": -0.1}, "'rq_s' is not a non-negative number"),
    ({"rq_s": "0.1"}, "'rq_s' is not a non-negative number"),
    ({"ivcs": 1.5}, "'ivcs' is not a non-negative integer"),
    ({"thr_n": True}, "'thr_n' is not a non-negative integer"),
    ({"thr_s": float("inf")}, "'thr_s' is not a non-negative number"),
])
def test_wrongly_typed_contention_fields_skip_the_sample(change: dict[str, Any],
                                                         why: str) -> None:
    bad = sample(4)
    bad.update(change)
    s = parse_lines(lines(HEADER, bad, sample(6, [0.5]), END))
    assert [r["i"] for r in s.samples] == [6] and why in s.problems[0]


def test_host_cpu_pressure_is_read_where_the_kernel_has_it(tmp_path: Path) -> None:
    from harness.runtimes.base import cpu_pressure

    psi = tmp_path / "cpu"
    psi.write_text("some avg10=21.90 avg60=12.83 avg300=4.57 total=17462070\n"
                   "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    assert cpu_pressure(str(psi)) == {"psi_some_avg10": 21.9, "psi_some_total_us": 17462070.0}
    assert cpu_pressure(str(tmp_path / "absent")) == {}
