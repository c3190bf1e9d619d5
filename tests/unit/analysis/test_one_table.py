"""Every verdict of every kind from one ordered table (issue 50): the rule `--why` shows
as fired is the stored rule, and the stored rule decides the stored verdict, on
generated evidence, on generated runs (live and fixed, with and without a baseline),
and through a sweep's `report --why` for a slowdown cell."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
from fakeruntime import Behaviour
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sweepkit import DEFAULTS, FakeSweep
from test_verdict import series

from harness.analysis.decision import CellFacts, decide
from harness.analysis.facts import Facts
from harness.analysis.kinds import KINDS
from harness.analysis.records import (
    Baseline,
    Confirmation,
    MemoryTrend,
    PeakComparison,
    StepComparison,
)
from harness.analysis.rules import (
    MEMORY_RULES,
    RULE_IDS,
    RULES,
    Evidence,
    first_rule,
    memory_rule,
    why,
)
from harness.cli import main
from harness.result.codec import decode, encode
from harness.runtimes.base import RunOutcome
from harness.thresholds import AnalysisConfig

CFG = AnalysisConfig()
ROOT = Path(__file__).resolve().parents[3]
SOURCES = ("heap", "uss", "rss", "gpu", "fw")
KIND = st.sampled_from(["leak", "plateau", "stable", "ambiguous", "insufficient"])


@st.composite
def trends(draw: st.DrawFn) -> dict[str, MemoryTrend]:
    out = {}
    for source in draw(st.lists(st.sampled_from(SOURCES), unique=True, max_size=5)):
        slope = draw(st.floats(-1e3, 1e5))
        out[source] = MemoryTrend(source, 100, slope, slope - 10, slope + 10, slope * 100,
                                  slope, slope - 10, slope + 10, 1e8, 1e8 + slope * 100,
                                  1e8 + slope * 100, draw(KIND), creep=draw(st.booleans()))
    return out


TEXT = st.sampled_from(["", "figures"])
facts = st.builds(
    Facts, unavailable=st.none() | st.just("no image"), precheck=st.none() | st.just("sm_90"),
    ended=st.none() | st.sampled_from(["oom", "timeout", "crash", "not-applicable"]),
    gpu_unusable=st.none() | st.just("PTX JIT"),
    filling=st.lists(st.sampled_from(SOURCES), unique=True).map(tuple),
    slowdown=TEXT, busy=TEXT, regression=TEXT, suspected=TEXT,
    capped=st.sampled_from(["", "2,000 calls, its cap, in 0.1 s of its 5 s budget"]),
    rising=st.sampled_from([0, 4000]))


def fired(ev: Evidence) -> list[str]:
    return [line.split(". ", 1)[1].split(":")[0] for line in why(ev, CFG)
            if line[:1].isdigit() and ": fired" in line]


@settings(max_examples=400, deadline=None)
@given(memory=trends(), found=facts)
def test_why_shows_fired_the_one_rule_that_decides(memory: dict[str, MemoryTrend],
                                                   found: Facts) -> None:
    ev = Evidence(memory, found)
    rule, _ = first_rule(ev)
    assert fired(ev) == [rule.id]
    assert rule.says in KINDS
    # Memory alone (what the live decider reads): only the memory rules can fire, and
    # they say what the whole table says of that evidence.
    alone = Evidence(memory, Facts(filling=found.filling))
    assert first_rule(alone)[0] is memory_rule(alone)[0]
    assert first_rule(alone)[0] in MEMORY_RULES


OUTCOMES = {"ok": RunOutcome(exit_code=0), "oom": RunOutcome(exit_code=137, oom_killed=True,
                                                             mem_limit_bytes=1 << 30),
            "timeout": RunOutcome(exit_code=None, timed_out=True, duration_s=60.0),
            "crash": RunOutcome(exit_code=1, log_tail="Segmentation fault")}
run_shape = st.fixed_dictionaries({
    "heap_leak": st.sampled_from([0.0, 64.0, 16384.0]),
    "rss_leak": st.sampled_from([0.0, 16384.0]),
    "uss_leak": st.sampled_from([0.0, 16384.0, None]),
    "wall_growth": st.sampled_from([0.0, 1.0]),
    "cpu_growth": st.sampled_from([0.0, 1.0, None]),
    "rq_share": st.sampled_from([None, 0.9]),
    "n": st.sampled_from([40, 600]),
})
baselines = st.none() | st.builds(
    lambda ratio, confirmed, peak: Baseline(
        "v1", StepComparison(ratio, 0.001 if ratio > 1.1 else 0.5,
                             "slower" if ratio > 1.1 else "~", 100, 100),
        PeakComparison(peak, "higher" if peak > 1.1 else "~"),
        confirmation=None if confirmed is None else Confirmation(
            "slower", "slower" if confirmed else "~", ratio, ratio, ratio, [1], "rounds")),
    st.sampled_from([1.0, 1.5]), st.none() | st.booleans(), st.sampled_from([1.0, 2.0]))


def stored(v: Any) -> Evidence:
    """The evidence as result.json keeps it, read back."""
    memory = {k: decode(MemoryTrend, json.loads(json.dumps(encode(t))))
              for k, t in v.memory.items()}
    return Evidence(memory, decode(Facts, json.loads(json.dumps(encode(v.facts)))))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=run_shape, ended=st.sampled_from(sorted(OUTCOMES)), base=baselines,
       first=st.booleans())
def test_a_run_is_decided_by_the_stored_rule(shape: dict[str, Any], ended: str,
                                             base: Baseline | None, first: bool) -> None:
    s = series(**shape)
    v = decide(CellFacts(CFG, s, OUTCOMES[ended], first=first))
    if base is not None:
        v = decide(CellFacts(CFG, baseline=base, within=v))
    ev = stored(v)
    rule, _ = first_rule(ev)
    assert (rule.id, rule.says) == (v.rule, v.verdict), v.reason
    assert fired(ev) == [v.rule]


def test_no_rule_id_is_written_outside_the_table() -> None:
    """A rule id is given to a verdict only by the table: no `rule=` keyword with a
    string literal anywhere in harness/."""
    found = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.keyword) and node.arg == "rule" and isinstance(
                    node.value, ast.Constant) and isinstance(node.value.value, str):
                found.append(f"{path.relative_to(ROOT)}:{node.value.lineno}")
    assert found == []


def test_the_table_decides_every_kind_a_cell_can_get() -> None:
    decided = {r.says for r in RULES}
    assert decided == set(KINDS), set(KINDS) - decided
    assert len(set(RULE_IDS)) == len(RULES)


def test_why_on_a_slowdown_cell_shows_the_slowdown_rule_fired(
        fake_sweep: FakeSweep, capsys: pytest.CaptureFixture[str]) -> None:
    # (a repeat left: a slowdown a second run reads too stands, rule `one-run`'s else)
    run = fake_sweep(["v1"], Behaviour(slowdown_per_iter=2e-6), report=True, plan=True,
                     defaults={**DEFAULTS, "repeats": 1})
    (res,) = run.results.values()
    assert (res.verdict, res.rule) == ("slowdown", "slowdown"), res.reason
    # exit 1, as `harness report` on a slowdown (issue 63 item 12: --why exited 0)
    assert main(["report", str(run.root), "--why", res.id]) == 1
    out = capsys.readouterr().out
    said = [line for line in out.splitlines() if line[:1].isdigit()]
    assert [line for line in said if ": fired" in line] == [
        line for line in said if line.startswith(f"{RULE_IDS.index('slowdown') + 1}. slowdown:")]
    assert "steps: late steps" in out and "note:" not in out
    # AND the rule of its step times that made the slowdown (`rules.STEP_RULES`)
    assert "step times: rule steps-slowdown: slowdown" in out, out


def test_deciding_again_keeps_what_the_gpu_precheck_found() -> None:
    """`--reanalyze` decides from the same facts as the sweep: the precheck's finding
    (an unsupported image/GPU pair, run to decide) is not dropped."""
    from harness.reanalyze import within
    from harness.result.model import CellResult, GpuPart, ImagePart
    from harness.stages.settle import with_verdict

    s = series()
    v = decide(CellFacts(CFG, s, OUTCOMES["ok"], True, precheck=("unsupported", "sm_120")))
    res = with_verdict(CellResult("v1.gpu0.s", "gpu0.s", "ok", ImagePart("v1", 0),
                                  gpu=GpuPart("0", "gpu0")), v)
    again = within(CFG, res, s)
    assert [f.text for f in again.findings if f.kind == "gpu-check"] == [
        f.text for f in v.findings if f.kind == "gpu-check"]
    assert "unsupported: sm_120" in [f.text for f in again.findings]
