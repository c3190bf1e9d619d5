"""The typed CellResult: result.json is its serialisation; schema 1 directories load."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from harness.analysis.records import (
    Confirmation,
    Finding,
    MemoryTrend,
    Round,
    StepComparison,
    VsBaseline,
)
from harness.result.codec import DecodeError, decode, encode
from harness.result.model import (
    SCHEMA,
    CellResult,
    Fingerprint,
    ImagePart,
    cell_numbers,
    load_result,
)

RECORDED = Path(__file__).parents[1] / "data" / "recorded"


def test_an_old_result_without_direction_or_rounds_takes_the_pooled_direction() -> None:
    res = load_result({"id": "x", "row": "r", "verdict": "ok",
                       "image": {"label": "b", "index": 1},
                       "vs_baseline": {"baseline": "a", "steps": {
                           "ratio": 1.5, "p_value": 0.001, "direction": "slower"},
                           "peak_rss": {"ratio": 1.0, "direction": "~"}}})
    vs = res.vs_baseline
    assert vs is not None
    assert vs.said_direction == "slower" and vs.confirmation is None and vs.cpu is None
    assert vs.peak_rss is not None and vs.peak_rss.ratio == 1.0
    assert cell_numbers(res) == "time 1.50x baseline (pooled, p=0.001; unconfirmed)"


def test_rounds_decide_the_direction_and_nan_reads_back() -> None:
    res = load_result({"schema": 1, "id": "x", "row": "r", "verdict": "ok",
                       "image": {"label": "b", "index": 1},
                       "vs_baseline": {"baseline": "a", "direction": "~",
                                       "steps": {"ratio": 1.5, "p_value": 0.001,
                                                 "direction": "slower"},
                                       "confirmation": {
                                           "suspected": "slower", "direction": "~",
                                           "confirmed": False, "ratio": 1.01, "lo": None,
                                           "hi": 1.2, "reason": "no change",
                                           "decided_by": [1, 2], "rounds": []}}})
    vs = res.vs_baseline
    assert vs is not None and vs.said_direction == "~"
    assert vs.confirmation is not None and vs.confirmation.decided_by == [1, 2]
    assert math.isnan(vs.confirmation.lo)
    assert cell_numbers(res) == ""


def full() -> CellResult:
    trend = MemoryTrend("heap", 100, 23552.0, 23000.0, 24000.0, 4.7e7, 23552.0, 22000.0,
                        25000.0, 1e6, 4.8e7, 4.9e7, "leak", 1024.0, 0.1)
    conf = Confirmation("slower", "slower", 1.3, 1.2, 1.4, [1, 2, 3], "3 rounds agree",
                        [Round(1, 0.01, 0.013, 0.0, 0.1, None, 1.0)])
    return CellResult(
        "b.gpu0.s", "gpu0.s", "regression", ImagePart("b", 1, "img:b", "sha256:1",
                                                       {"k": "v"}, ("numpy==1",)),
        reason="steps 1.30x a", memory={"heap": trend},
        vs_baseline=VsBaseline("a", StepComparison(1.3, 1e-5, "slower", 10, 10), None,
                               None, "slower", conf),
        fingerprint=Fingerprint(python="3.8", env={"CUDA_VERSION": "11.1"},
                                gpu={"devices": [{"name": "RTX 3090", "cc": [8, 6]}]},
                                heap={"func": "mallinfo2"}),
        findings=(Finding("regression", "regression"),))


def test_round_trip_through_json_is_exact() -> None:
    res = full()
    text = json.dumps(res.to_json())
    again = load_result(json.loads(text))
    assert again == res
    assert json.loads(text)["schema"] == SCHEMA


def test_a_wrong_type_names_its_key() -> None:
    data = full().to_json()
    memory = data["memory"]
    assert isinstance(memory, dict) and isinstance(memory["heap"], dict)
    memory["heap"]["slope"] = "fast"
    with pytest.raises(DecodeError, match=r"memory\.heap\.slope: expected a number"):
        load_result(data)


def test_missing_identity_and_unknown_schema_are_errors() -> None:
    with pytest.raises(DecodeError, match="verdict: missing"):
        load_result({"id": "x", "row": "r", "image": {"label": "a", "index": 0}})
    with pytest.raises(DecodeError, match=r"image\.index: missing"):
        load_result({"id": "x", "row": "r", "verdict": "ok", "image": {"label": "a"}})
    with pytest.raises(DecodeError, match="schema 9"):
        load_result({"schema": 9, "id": "x", "row": "r", "verdict": "ok",
                     "image": {"label": "a", "index": 0}})
    with pytest.raises(DecodeError, match="verdict: expected one of"):
        load_result({"id": "x", "row": "r", "verdict": "fine",
                     "image": {"label": "a", "index": 0}})


def test_every_stored_schema_1_result_in_the_test_data_loads() -> None:
    found = sorted(RECORDED.rglob("result.json"))
    for path in found:
        res = load_result(json.loads(path.read_text()))
        assert res.id and res.verdict
        assert load_result(json.loads(json.dumps(res.to_json()))) == res


def test_decode_fills_what_an_older_writer_left_out() -> None:
    got = decode(Fingerprint, {"python": "3.6"})
    assert got == Fingerprint(python="3.6")
    assert encode(got)["env"] == {}  # type: ignore[index]


def test_result_json_keeps_what_a_reader_of_schema_1_looked_for() -> None:
    data = full().to_json()
    vs = data["vs_baseline"]
    assert isinstance(vs, dict) and isinstance(vs["confirmation"], dict)
    conf = vs["confirmation"]
    assert conf["confirmed"] is True
    rounds = conf["rounds"]
    assert isinstance(rounds, list) and isinstance(rounds[0], dict)
    assert rounds[0]["ratio"] == pytest.approx(1.3)
    assert data["outcome"] == {**data["outcome"], "host_samples": 0}


def test_decode_with_skip_passes_over_a_bad_field_and_keeps_the_rest() -> None:
    said: list[str] = []
    got = decode(Fingerprint, {"python": "3.6", "env": ["CUDA_VERSION"],
                               "packages": {"numpy": "1.19"}}, skip=lambda e: said.append(str(e)))
    assert got == Fingerprint(python="3.6", packages={"numpy": "1.19"})
    assert said == ["env: expected a mapping, got ['CUDA_VERSION']"]
    with pytest.raises(DecodeError, match="env: expected a mapping"):
        decode(Fingerprint, {"env": ["CUDA_VERSION"]})


def test_findings_an_older_writer_kept_as_text_load_typed() -> None:
    """The H100 run's result.json (schema 2) kept findings as bare text."""
    path = (Path(__file__).parents[1] / "data" / "h100" / "gpu-real" / "cells"
            / "torch.gpu0.jax_leak" / "result.json")
    raw = json.loads(path.read_text())
    assert raw["schema"] == 2 and all(isinstance(f, str) for f in raw["findings"])
    res = load_result(raw)
    assert [f.kind for f in res.findings] == ["leak", "no-gpu"]
    assert res.findings[1].text == raw["findings"][1] and res.findings[1].flag
    # AND written again they are {kind, text}, read back equal
    again = res.to_json()
    assert again["schema"] == SCHEMA and again["findings"][1] == {  # type: ignore[index]
        "kind": "no-gpu", "text": raw["findings"][1]}
    assert load_result(json.loads(json.dumps(again))) == res
