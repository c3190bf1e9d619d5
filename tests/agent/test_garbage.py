"""Cyclic garbage is not a leak (found on a real H100: PyTorch's rfft leaves ~0.3 KiB/call
that only Python's oldest-generation collection frees, and a 550-call run can end before
the first one, tests/data/h100/sweep-1123). The agent collects once after the last
measured call and records the heap before and after (`collected` in the end record);
growth that collection gives back is called stable, with a note; a real leak still is one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_agent import INTERPRETERS, run_agent, scenario

from harness.analysis.decision import CellVerdict, within_run
from harness.analysis.rules import TIME_UNDECIDED
from harness.protocol.ingest import read_samples
from harness.runtimes.base import RunOutcome
from harness.thresholds import AnalysisConfig

# Each call leaves a reference cycle holding 1 KB; automatic collection is off, as it
# is in effect while the oldest generation waits for its threshold.
CYCLES = """
import gc


def setup(params):
    gc.disable()
    return {"keep": params.get("keep", False), "kept": []}


def step(state):
    node = {"data": bytearray(1000)}
    node["self"] = node
    if state["keep"]:
        state["kept"].append(node)
"""


def decide(python: str, tmp_path: Path, keep: bool
           ) -> tuple[str, str, dict[str, object], CellVerdict]:
    script = scenario(tmp_path, CYCLES)
    # Kept cycles, 1 KB a call, grow like a cache filling over 600 calls (issue 37: the
    # leak verdict needs a run too long for a fill): 2,400 calls tell them apart.
    proc, _ = run_agent(python, script, tmp_path, iterations=2400 if keep else 600, warmup=20,
                        params={"keep": keep}, env={"PYTHONMALLOC": "malloc"})
    assert proc.returncode == 0, proc.stderr
    series = read_samples(tmp_path / "samples.jsonl")
    v = within_run(series, RunOutcome(exit_code=0), AnalysisConfig())
    assert series.end is not None
    return v.verdict, v.reason, dict(series.end.get("collected") or {}), v


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallinfo is glibc's")
@pytest.mark.parametrize("python", INTERPRETERS)
def test_garbage_that_one_collection_gives_back_is_not_a_leak(python: str,
                                                             tmp_path: Path) -> None:
    verdict, reason, collected, v = decide(python, tmp_path, keep=False)
    assert collected and collected["objects"] >= 600, collected
    assert int(collected["heap"]) - int(collected["heap_after"]) > 500 * 1000
    # ok; or, where a busy host stretched its late steps (the CI of eb71233 at load:
    # "late steps 1.24x early ... seen in one run of 600 calls, not replicated"),
    # undecided about its step time alone: the heap is what this test is about
    assert verdict == "ok" or (verdict == "ambiguous" and v.rule in TIME_UNDECIDED), reason
    said = " ".join([reason, *(f.text for f in v.findings)])
    assert "cyclic garbage" in said, said


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallinfo is glibc's")
def test_kept_cycles_are_still_a_leak(tmp_path: Path) -> None:
    verdict, reason, collected, _ = decide(str(INTERPRETERS[0].values[0]
                                            if hasattr(INTERPRETERS[0], "values")
                                            else INTERPRETERS[0]), tmp_path, keep=True)
    assert collected, "the agent recorded no collection"
    assert verdict == "leak" and reason.startswith("heap grows"), reason
