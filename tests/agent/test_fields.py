"""The protocol's field names in one list (harness/agent/fields.py): the agent writes
no field that list lacks, and the host's reader checks the fields of that list."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from test_agent import INTERPRETERS, OLDEST, run_agent, scenario

from harness.agent import fields
from harness.protocol import ingest

WITH_FW = """
def setup(params):
    return {"n": 0}


def step(state):
    state["n"] += 1
    if state["n"] == params_fail[0]:
        raise ValueError("boom")


params_fail = [10 ** 9]


def fw_bytes(state):
    return state["n"] * 1024


def info(state):
    return {"device": "cpu", "steps": state["n"]}
"""

OLDEST_PATH = str(OLDEST.values[0]) if hasattr(OLDEST, "values") else str(OLDEST)
KNOWN = {"header": set(fields.HEADER), "sample": set(fields.sample_fields()),
         "where": set(fields.WHERE), "end": set(fields.END)}


def unknown_fields(records: list[dict[str, Any]]) -> list[str]:
    """'<type>: <field>' for each field of a record that harness/agent/fields.py lacks."""
    return [f"{r['type']}: {key}" for r in records for key in sorted(set(r) - KNOWN[r["type"]])]


@pytest.mark.parametrize("python", [INTERPRETERS[-1], OLDEST])
def test_the_agent_writes_only_fields_of_the_list(python: str, tmp_path: Path) -> None:
    script = scenario(tmp_path, WITH_FW)
    proc, records = run_agent(python, script, tmp_path, "--sample-interval", "0.001",
                              iterations=60, warmup=10, every=5)
    assert proc.returncode == 0, proc.stderr
    # (no "where" record without --attribute: tests/agent/test_attribute.py)
    assert {r["type"] for r in records} == set(fields.RECORD_TYPES) - {"where"}
    unknown = unknown_fields(records)
    assert not unknown, f"the agent wrote {unknown}: " \
                        "add them to harness/agent/fields.py and to the host's reader"
    assert any("fw" in r for r in records if r["type"] == "sample")


def test_the_field_check_finds_an_unknown_field() -> None:
    # GIVEN records as the agent writes them, one with a field the list lacks
    records = [{"type": "sample", "src": "step", "dt_b64": ""},
               {"type": "where", "kinds": ["heap"], "heap": {}, "hot": 1},
               {"type": "end", "status": "ok", "took": 2}]
    # THEN the check names both
    assert unknown_fields(records) == ["where: hot", "end: took"]


def test_an_error_end_record_has_only_listed_fields(tmp_path: Path) -> None:
    script = scenario(tmp_path, WITH_FW.replace("10 ** 9", "5"))
    _proc, records = run_agent(sys.executable, script, tmp_path)
    end = records[-1]
    assert end["status"] == "error" and set(end) <= set(fields.END)
    assert set(end["error"]) <= set(fields.ERROR)


def test_the_reader_knows_the_list() -> None:
    assert set(ingest.HEADER_TYPES) <= set(fields.HEADER)
    assert set(ingest.END_TYPES) <= set(fields.END)
    assert set(fields.HEADER) - set(ingest.HEADER_TYPES) == {"type", "schema"}
    assert set(fields.END) - set(ingest.END_TYPES) == {"type", "status"}
    assert set(ingest.MEMORY_SOURCES) <= set(fields.sample_fields())
    assert set(ingest.CONTENTION_FIELDS) | set(ingest.GPU_ACTIVITY_FIELDS) <= set(
        fields.sample_fields())


def test_a_scenario_that_raises_leaves_its_traceback_on_stderr(tmp_path: Path) -> None:
    """Issue 21 point 5: agent.log (the cell's stderr) was empty when a scenario raised."""
    script = scenario(tmp_path, WITH_FW.replace("10 ** 9", "5"))
    proc, records = run_agent(OLDEST_PATH, script, tmp_path)
    assert records[-1]["status"] == "error"
    assert "Traceback (most recent call last)" in proc.stderr
    assert 'raise ValueError("boom")' in proc.stderr and "ValueError: boom" in proc.stderr
