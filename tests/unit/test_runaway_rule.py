"""Issue 61 point 3: a run the agent's safety stop ended is `leak` by the table's rule
`runaway`, whatever else its few readings say, and its words say what grew past what."""

from __future__ import annotations

from pathlib import Path

from fakeruntime import Behaviour, FakeRuntime
from sweepkit import DEFAULTS, write_matrix
from test_orchestrator import run

from harness import matrixfile
from harness.analysis.facts import memory_stopped
from harness.protocol.series import Series
from harness.result.words import cell_text

MiB = 2 ** 20


def test_a_run_the_safety_stop_ended_is_a_leak_with_what_grew(tmp_path: Path) -> None:
    path = write_matrix(tmp_path, ["v1"], name="stop", gpus=["0"], file="matrix.yaml",
                        defaults={**DEFAULTS, "iterations": 400, "warmup": 20})
    stop = {"rss": 700 * MiB, "grew": 400 * MiB, "limit": 384 * MiB, "call": 14,
            "phase": "warmup"}
    out = run(matrixfile.load(path), FakeRuntime(lambda c: Behaviour(memory_stop=stop)),
              tmp_path)
    res = out.results["v1.gpu0.loop"]
    assert res.verdict == "leak" and res.rule == "runaway", res.reason
    assert res.reason.startswith("the safety stop ended the run at call 14 (warm-up): "
                                 "memory grew 400 MiB after the first call, past the limit of "
                                 "384 MiB")
    assert cell_text(res).startswith("leak: memory past the safety stop's limit")


def test_the_watchdog_s_kill_names_the_call_that_did_not_return() -> None:
    series = Series(samples=[{"type": "sample", "src": "step", "phase": "measure", "i": i,
                              "t": i, "rss": 1, "dt": []} for i in (0, 10, 20)],
                    end={"type": "end", "status": "error", "memory_stop": {
                        "rss": 900 * MiB, "grew": 800 * MiB, "limit": 384 * MiB,
                        "killed": True}})
    said = memory_stopped(series)
    assert said.startswith("the safety stop killed the run in call 21, which did not "
                           "return while its memory grew 800 MiB"), said
