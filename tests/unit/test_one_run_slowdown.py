"""One run is a suspicion (issue 78): a slowdown seen within one run, which no second run
read too, is undecided (rule `one-run`), never a finding: a marked test and `harness.check`
pass it with a warning, a sweep names no first bad image for it (exit 4), and `harness
compare` stars no row for it ("host busy, not compared"). A slowdown a second run reads
too stands (rule `slowdown`)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import sweepkit
from fakeruntime import Behaviour, FakeRuntime
from pluginkit import HANG_S

from harness.analysis.decision import CellFacts, decide
from harness.cli import main
from harness.errors import EXIT_REGRESSION, EXIT_UNDECIDED
from harness.protocol.ingest import Series, parse_lines
from harness.runtimes.base import RunOutcome
from harness.sweeping.course import exit_code
from harness.thresholds import AnalysisConfig

pytest_plugins = ["pytester"]

CFG = AnalysisConfig()
OK = RunOutcome(exit_code=0)


def slowing(n: int = 1200, every: int = 10, step: float = 0.001, growth: float = 1.3,
            seed: int = 3) -> Series:
    """n calls whose wall and CPU time grow by `growth` of the first step over the run
    (a CPU-bound slowdown), memory flat."""
    rng = random.Random(seed)
    recs: list[dict[str, Any]] = [{"type": "header", "schema": 1}]
    for k in range(every, n + 1, every):
        dt = [step * (1 + growth * (k - every + j) / n) * rng.uniform(0.97, 1.03)
              for j in range(every)]
        recs.append({"type": "sample", "src": "step", "phase": "measure", "i": k,
                     "t": k * step, "rss": 300e6 + 4096 * rng.randint(-2, 2),
                     "uss": 250e6 + 4096 * rng.randint(-2, 2),
                     "heap": 120e6 + rng.randint(-64, 64), "dt": dt, "cpu": list(dt)})
    recs.append({"type": "end", "status": "ok", "iterations": n})
    return parse_lines([(json.dumps(r) + "\n").encode() for r in recs])


def test_a_slowdown_read_in_one_run_only_is_undecided_and_one_read_again_stands() -> None:
    # GIVEN steps rising 2.3x through one run, CPU-bound, and the cell runs no more
    v = decide(CellFacts(CFG, slowing(), OK, again=False))
    # THEN it is a suspicion, not a finding: undecided, saying what was seen and how to
    # confirm it
    assert (v.verdict, v.rule) == ("ambiguous", "one-run"), v.reason
    assert v.reason.startswith("late steps "), v.reason
    assert "seen in one run of 1,200 calls, not replicated" in v.reason, v.reason
    assert "a run of 2,400 calls that reads it too confirms it" in v.reason, v.reason
    # AND a cell that may run again asks for that run
    again = decide(CellFacts(CFG, slowing(), OK, again=True))
    assert again.verdict == "ambiguous" and again.rerun == 2400, again.reason
    # AND where an earlier run of the cell read the slowdown too, it stands
    stood = decide(CellFacts(CFG, slowing(), OK, again=False, replicated=True))
    assert (stood.verdict, stood.rule) == ("slowdown", "slowdown"), stood.reason


def test_a_sweep_names_no_first_bad_for_a_slowdown_one_run_read(tmp_path: Path) -> None:
    # GIVEN v2 slows within its run; `repeats: 0`, so no second run reads it
    run = sweepkit.swept(tmp_path, ["v1", "v2"], {"v2": Behaviour(slowdown_per_iter=5e-6)})
    res = run.results["v2.gpu0.loop"]
    # THEN undecided, no bad image named, exit 4
    assert (res.verdict, res.rule) == ("ambiguous", "one-run"), res.reason
    report = run.report()
    assert not report.bad_cells and exit_code(report) == EXIT_UNDECIDED
    assert all(r.first_bad is None for r in report.rows), report.rows


def test_a_slowdown_a_second_run_reads_too_is_a_slowdown(tmp_path: Path) -> None:
    # GIVEN the same, with a repeat left: the cell runs again, and the slowdown lasts
    run = sweepkit.swept(tmp_path, ["v1", "v2"], {"v2": Behaviour(slowdown_per_iter=5e-6)},
                         defaults={**sweepkit.DEFAULTS, "repeats": 1})
    res = run.results["v2.gpu0.loop"]
    assert (res.verdict, res.rule) == ("slowdown", "slowdown"), res.reason
    assert [a.verdict for a in res.attempts] == ["ambiguous", "slowdown"], res.attempts
    assert exit_code(run.report()) == EXIT_REGRESSION


def test_compare_of_two_hosts_says_a_one_run_slowdown_is_not_compared(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN two hosts, one clean, the other's v2 slowing within one run
    quiet = sweepkit.swept(tmp_path / "a", ["v1", "v2"], FakeRuntime(lambda c: Behaviour()),
                           out=tmp_path / "a" / "r").root
    busy = sweepkit.swept(tmp_path / "b", ["v1", "v2"],
                          {"v2": Behaviour(slowdown_per_iter=5e-6)},
                          out=tmp_path / "b" / "r").root
    code = main(["compare", str(quiet), str(busy)])
    out = capsys.readouterr().out
    # THEN no row is starred, nor a difference said: the host was busy, not compared
    assert not [ln for ln in out.splitlines() if ln.startswith("*")], out
    assert "loop with v2: host busy, not compared: a slowdown seen in one run on " in out, out
    assert "slows down only" not in out and "ok on" not in out, out
    # AND no answer there: exit 4, not 1
    assert code == EXIT_UNDECIDED, out


# A step 2 ms a call at first, 1 ms more every 50 calls (time.sleep: the host's load
# does not make it, nor the CPU's speed); a 0.3 s budget whose bound (`overrun=2`) leaves
# no room for the run twice as long that rule `rising` asks: one run reads it.
SLOWING = '''
import time

import pytest

N = [0]


@pytest.mark.harness_leaks(budget="0.3s", overrun=2)
def test_slows():
    N[0] += 1
    time.sleep(0.002 * (1 + N[0] / 50))
'''


def test_a_marked_test_that_slows_in_one_run_passes_with_a_warning(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_slowing=SLOWING)
    got = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", timeout=HANG_S)
    text = got.stdout.str()
    # THEN it passes, undecided, saying what it saw and how to confirm it
    got.assert_outcomes(passed=1, warnings=1)
    assert "harness: undecided, passed: ambiguous" in text, text
    if "(rule one-run)" in text:      # else a busy host's delay, or too few calls
        assert "seen in one run of " in text and "set budget >= " in text, text
