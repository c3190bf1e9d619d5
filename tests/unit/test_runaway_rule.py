"""Issue 61 point 3: a run the agent's safety stop ended is `leak` by the table's rule
`runaway`, whatever else its few readings say, and its words say what grew past what."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fakeruntime import Behaviour, FakeRuntime
from sweepkit import DEFAULTS, write_matrix
from test_orchestrator import run

from harness import matrixfile
from harness.analysis.facts import memory_stopped
from harness.protocol.series import Series
from harness.result.model import cell_text

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


def test_explain_of_a_runaway_cell_sizes_its_run_under_the_limit_and_says_why_not(
        tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    """Issue 79 item 9: `harness explain` on a cell the safety stop ended ran it again
    with --attribute for 40 calls (4 GiB for a step that keeps 100 MiB), the safety stop
    ended that run too, and the answer was `where (cell; 0 calls ...):` and nothing."""
    import json

    from sweepkit import on_the_cli, sweep_matrix

    from harness.cli import main
    from harness.runtimes.base import Progress, RunOutcome, RunRequest

    # GIVEN a cell whose run the safety stop ended at call 5 of its warm-up: 400 MiB
    # grown after the first call, 100 MiB a call, past the limit of 384 MiB
    stop = {"rss": 500 * MiB, "grew": 400 * MiB, "limit": 384 * MiB, "call": 5,
            "phase": "warmup"}

    class Stopped(FakeRuntime):
        """The attributed run is stopped again before its measured phase, as the
        agent's is: its where record says only that."""

        def run(self, request: RunRequest, progress: Progress) -> RunOutcome:
            ended = super().run(request, progress)
            if request.attribute:
                path = request.outdir / "samples.jsonl"
                lines = [json.loads(x) for x in path.read_text().splitlines()]
                for x in lines:
                    if x["type"] == "where":
                        x.clear()
                        x.update({"type": "where", "kinds": list(request.attribute),
                                  "errors": {"all": "the run ended before its measured "
                                                    "phase"}})
                path.write_text("".join(json.dumps(x) + "\n" for x in lines))
            return ended

    runtime = Stopped(lambda c: Behaviour(memory_stop=stop, leak_per_iter=100 * MiB))
    path = write_matrix(tmp_path, ["v1"], name="stop", defaults={
        **DEFAULTS, "iterations": 400, "warmup": 20})
    run = sweep_matrix(path, runtime, plan=True, report=True)
    assert run.results["v1.gpu0.loop"].rule == "runaway"
    on_the_cli(monkeypatch, runtime)
    capsys.readouterr()
    main(["explain", str(run.store.root)])
    out, err = capsys.readouterr()
    # THEN its attributed run makes the calls the limit holds with room to spare (half
    # of 384 MiB at 100 MiB a call: one warm-up call, one measured), and says why
    [(_, _, calls, _)] = runtime.attributed
    assert calls == 1, runtime.attributed
    assert ("fewer calls than the sweep's: the safety stop ended its run, 100 MiB a call "
            "past the first") in err, err
    # AND where it still finds nothing, the answer says why
    assert "not attributed: the run ended before its measured phase (the safety stop " \
           "ended the run" in out, out
