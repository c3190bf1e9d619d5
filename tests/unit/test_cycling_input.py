"""A cost that cycles with the scenario's input is not a slowdown (issue 49): a loop over
names or files whose later items cost more rises through any run shorter than its cycle,
and two tests of a rise pass. A slowdown lasts: the first attempt's rise is looked at
again in a run twice as long (rule `rising`), where a cycle comes back
(`stepreading.came_back`) and a slowdown still rises."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import sweepkit

from harness.result.model import CellResult
from harness.runtimes.local import LocalRuntime

# 3,000 inputs in a cycle, the k-th costing a sum over 3,000 + 3 k numbers (1x..4x): the
# emoji shortcode scan of issue 49, names later in the table scanned further.
CYCLE = '''
def setup(params):
    return {"n": 0}
def step(state):
    state["n"] += 1
    sum(range(3000 + 3 * (state["n"] % 3000)))
'''
# Each call sums one more number than the last: slower every call, for good.
GROWING = '''
def setup(params):
    return {"keep": []}
def step(state):
    state["keep"].extend(range(4))
    sum(state["keep"])
'''


def sweep(tmp_path: Path, scenarios: dict[str, str]) -> dict[str, CellResult]:
    path = sweepkit.write_matrix(tmp_path, [{"name": "py", "python": sys.executable}],
                                 list(scenarios), name="cycle", gpus=None,
                                 defaults={"iterations": 2500, "warmup": 100},
                                 files=scenarios)
    run = sweepkit.sweep_matrix(path, LocalRuntime(tmp_path / "cache"), out=tmp_path / "out")
    return {r.scenario.id: r for r in run.results.values()}


def test_a_cost_that_cycles_with_the_input_is_not_a_slowdown_and_one_that_grows_is(
        tmp_path: Path) -> None:
    got = sweep(tmp_path, {"cycle.py": CYCLE, "growing.py": GROWING})
    cycle, growing = got["cycle"], got["growing"]
    # THEN the cycle, rising through its first 2,500 calls (the rule before called that
    # a slowdown where the machine showed the rise), is no finding: where its first
    # attempt read the rise, the cell ran again twice as long, and it came back there
    assert cycle.verdict not in ("slowdown", "regression"), cycle.reason
    first = cycle.attempts[0]
    if "rising through the whole run" in first.reason:
        assert first.verdict == "ambiguous" and len(cycle.attempts) >= 2
        assert cycle.attempts[1].iterations == 5000
    # AND the slowdown that grows per call was looked at again and lasted: a slowdown,
    # or, where its runs were long enough to tell the 32 B/call its list keeps from a
    # cache (a loaded CI's took three attempts, the last of 64,816 calls), a leak with
    # the slowdown beside it. Its first attempt is never the verdict; it reads the rise
    # (rule `rising`), or, where a loaded machine hid the rise in 2,500 calls, the
    # growth (rule `creep`): either runs it again longer
    assert growing.verdict in ("slowdown", "leak"), growing.reason
    if growing.verdict == "leak":   # its steps said beside (or the busy host that voided them)
        assert {"slowdown", "busy-host"} & {f.kind for f in growing.findings}, growing.findings
    # ... and where its memory read growth not decided yet (or neither growth nor stable:
    # rule `unsure`, a CI's heap at +34 B/call), the slowdown says so: never
    # a slowdown alone (issue 78 point 5)
    elif any(t.kind == "ambiguous" for t in growing.memory.values()):
        assert re.search(r"; and memory (grows|is undecided): ", growing.reason), (
            growing.reason)
    first = growing.attempts[0]
    assert first.verdict == "ambiguous" and len(growing.attempts) >= 2, first.reason
    if "rising through the whole run" in first.reason:
        # twice as long, or as long as its growth asks where memory grew undecided too
        # (its list keeps 32 B a call: a fill asks 4x its calls, a creep what passes its
        # floor)
        asked = re.findall(r"(?:running it again for|a run of) ([\d,]+)", first.reason)
        assert growing.attempts[1].iterations == max(
            5000, *(int(n.replace(",", "")) for n in asked)), first.reason


def test_a_live_ok_does_not_stop_a_run_whose_steps_still_rise(tmp_path: Path) -> None:
    # GIVEN the matrix (max_iterations: 2000): memory flat from the first calls,
    # so the live look finds a certain `ok` at call ~260, while the cycle's cost rises
    path = sweepkit.write_matrix(tmp_path, [{"name": "py", "python": sys.executable}],
                                 ["cycle.py"], name="live", gpus=None,
                                 defaults={"max_iterations": 2000, "warmup": 100},
                                 files={"cycle.py": CYCLE})
    run = sweepkit.sweep_matrix(path, LocalRuntime(tmp_path / "cache"), out=tmp_path / "out")
    (res,) = run.results.values()
    # THEN it is not a slowdown: the run went on while its steps still rose (the rule
    # before stopped it on its memory at ~260 calls, and the rise read as a slowdown
    # there and in its run twice as long, stopped alike). Where it stopped early, the
    # steps up to there showed no slowdown (a loaded machine can hide the rise).
    assert res.verdict not in ("slowdown", "regression"), res.reason


def test_a_live_ok_is_held_back_only_by_a_slowdown_the_verdict_would_read() -> None:
    """The live look asks the verdict's question of the steps (`step_reading`): a wall
    clock that rose only because the CPU got slower (the canary loop slower call after
    call, 3x by the end, the step all CPU work) is no slowdown there, so it does not keep
    a run with flat memory going (the guard before read the wall clock alone and never
    stopped it)."""
    import json

    import numpy as np

    from harness.analysis.sequential import LiveDecider
    from harness.protocol.ingest import Record, parse_lines
    from harness.thresholds import AnalysisConfig

    rng = np.random.default_rng(7)
    recs: list[dict[str, object]] = [{"type": "header", "schema": 1}]
    for k in range(1, 601):
        speed = 1.0 + k / 300                          # the CPU slower call after call
        dt = list(20e-6 * speed * rng.uniform(0.95, 1.05, 10))
        recs.append({"type": "sample", "src": "step", "phase": "measure", "i": 10 * k,
                     "t": k * 2e-4, "heap": 30_000_000 + int(rng.normal(0, 40_000)),
                     "dt": dt, "cpu_s": sum(dt), "ref_s": 1e-3 * speed})
    series = parse_lines([(json.dumps(r) + "\n").encode() for r in recs])
    decider = LiveDecider(AnalysisConfig(), 50, 20000)
    stops = [d for s in series.samples if (d := decider.feed(Record("sample", 0, s)))]
    assert [d.verdict for d in stops] == ["stable"], stops
    assert stops[0].iterations > 1000, stops     # past the CPU's slowing, it stopped
