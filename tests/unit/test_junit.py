"""junit.xml: one testcase per cell; bad verdicts fail with their numbers (golden file)."""

from __future__ import annotations

import io
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from harness.report import JunitReporter, Report
from tests.resultkit import as_results

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("HARNESS_UPDATE_GOLDEN") == "1"


def trend(slope: float, kind: str) -> dict[str, Any]:
    return {"source": "heap", "n": 180, "slope": slope, "slope_lo": slope * 0.98 - 10,
            "slope_hi": slope * 1.02 + 10, "growth": slope * 1800, "late_slope": slope,
            "late_lo": slope * 0.9, "late_hi": slope * 1.1, "start": 1.0e8,
            "end": 1.0e8 + slope * 1800, "peak": 1.0e8 + slope * 1800, "kind": kind}


def cell(label: str, index: int, verdict: str, reason: str, scenario: str = "rfft_loop",
         **extra: Any) -> dict[str, Any]:
    res: dict[str, Any] = {
        "schema": 1, "id": f"{label}.gpu0.{scenario}", "row": f"gpu0.{scenario}",
        "verdict": verdict, "reason": reason,
        "image": {"label": label, "index": index, "ref": f"nvcr.io/nvidia/tensorflow:{label}"},
        "gpu": {"value": "0", "label": "gpu0"}, "scenario": {"id": scenario},
        "carrier": "heap", "memory": {"heap": trend(0.0, "stable")},
        "steps": {"n": 2000, "median_s": 0.0011, "early_median_s": 0.0011,
                  "late_median_s": 0.0011, "ratio": 1.0, "p_value": 0.5, "slowdown": False},
        "summary": {"median_step_s": 0.0011}, "timings": {"cell_s": 12.5},
        "fingerprint": {}, "end": {},
    }
    res.update(extra)
    return res


def results() -> dict[str, dict[str, Any]]:
    cells = [
        cell("20.12-tf1-py3", 0, "ok", "memory stable, no slowdown"),
        cell("21.06-tf1-py3", 1, "regression", "steps 1.52x 20.12-tf1-py3 (p=1e-30)",
             vs_baseline={"baseline": "20.12-tf1-py3",
                          "steps": {"ratio": 1.52, "p_value": 1e-30, "direction": "slower"},
                          "peak_rss": {"ratio": 1.01, "direction": "~"}}),
        cell("22.12-tf1-py3", 2, "leak", "heap grows +23.0 KiB/call",
             memory={"heap": trend(23 * 1024.0, "leak")}),
        cell("20.12-tf1-py3", 0, "not-applicable", "no kernel image for sm_89", "zeros"),
        cell("21.06-tf1-py3", 1, "ambiguous", "heap neither clearly growing nor stable",
             "zeros"),
        cell("22.12-tf1-py3", 2, "crash", "RuntimeError: bad \x1b[31m<&>", "zeros",
             end={"error": {"traceback": "Traceback...\nRuntimeError: bad \x1b[31m<&>\x00"}}),
    ]
    return as_results({c["id"]: c for c in cells})


@pytest.fixture
def xml_text() -> str:
    out = io.StringIO()
    JunitReporter.from_results(Report.from_results("tf1-rfft", results())).render(out)
    return out.getvalue()


def test_junit_golden(xml_text: str) -> None:
    golden = GOLDEN / "junit.xml"
    if UPDATE:
        golden.write_text(xml_text)
    assert xml_text == golden.read_text(), "junit.xml changed; HARNESS_UPDATE_GOLDEN=1 to accept"


def test_one_testcase_per_cell_and_counts(xml_text: str) -> None:
    top = ET.fromstring(xml_text.split("\n", 1)[1])  # parses: no forbidden characters left
    cases = top.findall("./testsuite/testcase")
    assert len(cases) == 6
    assert {k: top.get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "6", "failures": "2", "errors": "1", "skipped": "2"}
    by_name = {c.get("name"): c for c in cases}
    leak = by_name["22.12-tf1-py3.gpu0.rfft_loop"].find("failure")
    assert leak is not None and leak.get("type") == "leak"
    assert "heap +23.0 KiB/call" in str(leak.get("message"))
    assert "CI +22.530..+23.470" in str(leak.text)
    regression = by_name["21.06-tf1-py3.gpu0.rfft_loop"].find("failure")
    assert regression is not None
    assert "time 1.52x baseline" in str(regression.get("message"))
    crash = by_name["22.12-tf1-py3.gpu0.zeros"].find("error")
    assert crash is not None and "<&>" in str(crash.text)
    assert by_name["20.12-tf1-py3.gpu0.zeros"].find("skipped") is not None
    assert by_name["20.12-tf1-py3.gpu0.rfft_loop"].get("time") == "12.500"
