"""Report model and renderers over hand-built cell results (memray's reporter tests' shape)."""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from harness.report import ConsoleReporter, MarkdownReporter, Report, write_all
from harness.result.model import load_result
from harness.store import RunStore
from harness.store.gate import read_run

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("HARNESS_UPDATE_GOLDEN") == "1"


def result(label: str, index: int, verdict: str, reason: str, tf: str, cuda: str,
           scenario: str = "rfft_loop", heap_slope: float | None = 0.0,
           median_step_s: float | None = 0.0011) -> dict[str, Any]:
    cid = f"{label}.gpu0.{scenario}"
    res: dict[str, Any] = {
        "schema": 1, "id": cid, "row": f"gpu0.{scenario}", "verdict": verdict, "reason": reason,
        "image": {"label": label, "index": index, "ref": f"nvcr.io/nvidia/tensorflow:{label}"},
        "gpu": {"value": "0", "label": "gpu0"}, "scenario": {"id": scenario},
        "carrier": "heap", "memory": {}, "summary": {"median_step_s": median_step_s},
        "fingerprint": {"python": "3.8.10", "env": {"CUDA_VERSION": cuda},
                        "packages": {"tensorflow": tf}},
        "host_samples": [{"t": 0.0, "usage": 1}],
    }
    if heap_slope is not None:
        res["memory"]["heap"] = {"slope": heap_slope, "kind": "leak" if heap_slope else "stable"}
    return res


def hand_built() -> dict[str, dict[str, Any]]:
    cells = [
        result("20.12-tf1-py3", 0, "ok", "memory stable, no slowdown", "1.15.4", "11.1.1"),
        result("22.12-tf1-py3", 1, "leak", "heap grows +23.0 KiB/call", "1.15.5",
               "11.8.0", heap_slope=23 * 1024.0, median_step_s=0.0019),
        result("20.12-tf1-py3", 0, "ok", "fine", "1.15.4", "11.1.1", scenario="rfft_zeros",
               heap_slope=None, median_step_s=None),
        result("22.12-tf1-py3", 1, "crash", "ValueError: a|b <script>alert(1)</script>\nnext",
               "1.15.5", "11.8.0", scenario="rfft_zeros"),
    ]
    return {c["id"]: load_result(c) for c in cells}


@pytest.fixture
def report() -> Report:
    return Report.from_results("tf1|rfft", hand_built(), {"runtime": "docker"})


def test_model(report: Report) -> None:
    assert report.images == ["20.12-tf1-py3", "22.12-tf1-py3"]
    assert report.bad_cells == ["22.12-tf1-py3.gpu0.rfft_loop", "22.12-tf1-py3.gpu0.rfft_zeros"]
    header, body = report.table()
    assert header == ["row", "20.12-tf1-py3", "22.12-tf1-py3", "first bad / last good"]
    assert body[0][0] == "gpu0.rfft_loop"
    assert body[0][2] == "leak: heap +23.0 KiB/call, 1.9 ms/call"
    assert body[1][1] == "ok"  # no numbers known: just the verdict
    cells = report.to_json()["cells"]
    assert isinstance(cells, dict)
    # the host's samples stay in each cell's result.json, not in results.json
    assert all("host_samples" not in c for c in cells.values())
    assert '"usage"' not in json.dumps(cells)
    assert report.to_json()["bad_cells"] == report.bad_cells


def test_console_without_colour_on_a_stringio(report: Report) -> None:
    # GIVEN a report WHEN rendered to a non-TTY
    out = io.StringIO()
    ConsoleReporter.from_results(report).render(out)
    text = out.getvalue()
    # THEN there are no escape codes, and the first-bad sentence and diff are there
    assert "\x1b[" not in text
    assert "gpu0.rfft_loop: first bad: 22.12-tf1-py3 (last good: 20.12-tf1-py3)" in text
    assert "  pip tensorflow: 1.15.4 -> 1.15.5" in text
    assert "  CUDA_VERSION: 11.1.1 -> 11.8.0" in text
    assert "leak: heap +23.0 KiB/call" in text


def test_console_colour_when_asked(report: Report) -> None:
    out = io.StringIO()
    ConsoleReporter.from_results(report).render(out, colour=True)
    assert "\x1b[31mleak" in out.getvalue()


def split_row(line: str) -> list[str]:
    """Cells of a GFM table row: split on pipes that are not escaped."""
    assert line.startswith("|") and line.endswith("|"), line
    return [c.strip() for c in re.split(r"(?<!\\)\|", line[1:-1])]


def tables(text: str) -> list[list[str]]:
    out: list[list[str]] = []
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            out.append(current)
            current = []
    if current:
        out.append(current)
    return out


def render_md(report: Report) -> str:
    out = io.StringIO()
    MarkdownReporter.from_results(report).render(out)
    return out.getvalue()


def test_markdown_tables_are_valid_gfm(report: Report) -> None:
    text = render_md(report)
    found = tables(text)
    assert len(found) == 1 + 2 * 2  # the summary, then per row: what changed, the cells
    for table in found:
        width = len(split_row(table[0]))
        separator = split_row(table[1])
        # THEN the separator row has one `---` per header cell, every row the same width
        assert len(separator) == width
        assert all(re.fullmatch(r":?-{3,}:?", c) for c in separator)
        for line in table[2:]:
            assert len(split_row(line)) == width, line


def test_markdown_escapes_pipes_and_html(report: Report) -> None:
    text = render_md(report)
    assert "<script>" not in text
    assert "&lt;script>" in text
    assert "a\\|b" in text
    assert "# harness sweep: tf1\\|rfft" in text
    # the newline inside the reason did not break the table row
    assert "&lt;/script> next |" in text


def test_markdown_golden(report: Report) -> None:
    text = render_md(report)
    golden = GOLDEN / "report.md"
    if UPDATE:
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text(), "report.md changed; HARNESS_UPDATE_GOLDEN=1 to accept"


def test_write_all_and_load_results_round_trip(tmp_path: Path, report: Report) -> None:
    store = RunStore.open(tmp_path, "demo", False)
    try:
        for res in report.results.values():
            store.write_cell(res)
        paths = write_all(store, report)
    finally:
        store.unlock()
    assert [p.name for p in paths] == ["results.json", "report.md", "report.html", "junit.xml"]
    assert paths[1].read_text() == render_md(report)
    loaded = read_run(store.root).results
    assert loaded == report.results
    again = Report.from_results("tf1|rfft", loaded)
    assert [r.sentence for r in again.rows] == [r.sentence for r in report.rows]


def test_a_scenario_that_raises_shows_where_on_the_terminal() -> None:
    """Issue 21 point 5: the terminal said only "ValueError: boom at step 6"."""
    import io as _io

    from harness.protocol.ingest import raised_at
    from harness.report import ConsoleReporter, Report
    from harness.result.model import load_result

    tb = ('Traceback (most recent call last):\n'
          '  File "/x/harness/agent/agent.py", line 646, in run\n    step(state)\n'
          '  File "/tmp/s/boom.py", line 8, in step\n    raise ValueError("boom")\n'
          'ValueError: boom at step 6\n')
    res = load_result({"id": "a.cpu.boom", "row": "cpu.boom", "verdict": "crash",
                       "reason": f"ValueError: boom at step 6 (at {raised_at(tb)})",
                       "image": {"label": "a", "index": 0},
                       "end": {"status": "error", "error": {
                           "type": "ValueError", "message": "boom at step 6",
                           "traceback": tb}}})
    out = _io.StringIO()
    ConsoleReporter.from_results(Report.from_results("x", {res.id: res})).render(out)
    text = out.getvalue()
    assert "a.cpu.boom: ValueError: boom at step 6 (at boom.py:8 in step)" in text
    assert 'File "/tmp/s/boom.py", line 8, in step: raise ValueError("boom")' in text
    assert "agent.py" not in text
