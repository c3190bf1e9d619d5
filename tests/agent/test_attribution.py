"""harness/agent/attribution.py on real scenarios: the "where" record's heap, stack and
error paths, run by tests/agent/attribution_driver.py (the agent's call sequence) under
the interpreter running pytest and the oldest one pyenv has (3.6 where present).

TF1 step stats run in the TF 1.15 images (tests/integration/test_attribution_tf1.py);
torch's profiler and CUDA history on a GPU (tests/integration/test_attribution_torch.py).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from loadfile import load_file

from tests.agent.test_agent import INTERPRETERS, OLDEST

DRIVER = Path(__file__).resolve().parent / "attribution_driver.py"
AGENT_DIR = Path(__file__).resolve().parents[2] / "harness" / "agent"
CURRENT = next(p for p in INTERPRETERS if "current" in str(p.id))
PYTHONS = [CURRENT] + ([OLDEST] if OLDEST is not CURRENT else [])

GROW = """
def setup(params):
    return {"keep": []}


def step(state):
    state["keep"].append(bytearray(%d))  # GROW LINE
"""

CONTROL = """
def setup(params):
    return {"keep": []}


def step(state):
    state["keep"].append(bytearray(1000))  # CONTROL LINE
    state["keep"].pop()
"""

SLOWING = """
def setup(params):
    return {"n": 0}


def fixed_work():
    x = 0
    for i in range(60000):
        x += i
    return x


def growing_work(n):
    x = 0
    for i in range(n):
        x += i
    return x


def step(state):
    state["n"] += 1
    fixed_work()
    growing_work(state["n"] * state["n"] * 8)
"""


def _line(text: str, marker: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if marker in line)


def drive(python: str, tmp: Path, source: str, kinds: str, count: int, *more: int,
          env: dict[str, str] | None = None) -> dict[str, Any]:
    scenario = tmp / "scenario.py"
    scenario.write_text(textwrap.dedent(source))
    out = subprocess.run([python, str(DRIVER), str(scenario), kinds, str(count)]
                         + [str(m) for m in more], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    record: dict[str, Any] = json.loads(out.stdout)
    assert record["type"] == "where"
    return record


def _sites_at(sites: list[dict[str, Any]], path: Path, line: int) -> list[dict[str, Any]]:
    return [s for s in sites if s["frames"] and s["frames"][0][:2] == [str(path), line]]


@pytest.mark.parametrize("python", PYTHONS)
def test_heap_names_the_growing_line_with_its_bytes_per_call(python: str, tmp_path: Path) -> None:
    size, calls = 2000, 500
    rec = drive(python, tmp_path, GROW % size, "heap", calls)
    heap = rec["heap"]
    assert rec["calls"] == calls and heap["frames"] >= 10
    line = _line(GROW, "GROW LINE")
    top = heap["sites"][0]
    assert top["frames"][0] == [str(tmp_path / "scenario.py"), line, "step"]
    # A bytearray of `size` bytes and its list slot: between size and size + 200 a call.
    assert size <= top["size"] / calls <= size + 200
    assert calls <= top["count"] <= 2 * calls + 5
    assert heap["traced_end"] >= top["size"] and heap["peak"] >= heap["traced_end"]
    # No frame of the agent's own files, the driver's frames below the scenario kept.
    for site in heap["sites"]:
        assert not any(f[0].startswith(str(AGENT_DIR)) for f in site["frames"])
    assert "errors" not in rec


IN_GENEXPR = """
def setup(params):
    return {"keep": []}


def step(state):
    state["keep"].extend(bytearray(2000) for _ in range(1))  # GENEXPR LINE
"""


@pytest.mark.parametrize("python", PYTHONS)
def test_heap_in_a_generator_expression_is_named_by_its_function(python: str,
                                                                 tmp_path: Path) -> None:
    """Issue 51: on Python before 3.11 (no co_qualname) the generator expression's line
    was named `<genexpr>` alone, so the host could not name `step`, where it is written."""
    from harness.analysis.where import site_key

    rec = drive(python, tmp_path, IN_GENEXPR, "heap", 300)
    top = rec["heap"]["sites"][0]
    line = _line(IN_GENEXPR, "GENEXPR LINE")
    assert top["frames"][0] == [str(tmp_path / "scenario.py"), line, "step.<locals>.<genexpr>"]
    assert site_key(top["frames"], "scenario.py") == f"scenario.py:{line} step"


def test_code_without_a_qualified_name_is_named_as_python_3_11_names_it() -> None:
    from types import SimpleNamespace

    mod = _attribution()
    assert mod.qualname(SimpleNamespace(co_name="<genexpr>"), "step") == "step.<locals>.<genexpr>"
    assert mod.qualname(SimpleNamespace(co_name="<lambda>"), "") == "<lambda>"
    assert mod.qualname(SimpleNamespace(co_name="helper"), "step") == "helper"
    assert mod.qualname(SimpleNamespace(co_name="<listcomp>", co_qualname="f.<locals>.<listcomp>"),
                        "g") == "f.<locals>.<listcomp>"


@pytest.mark.parametrize("python", PYTHONS)
def test_heap_control_without_growth_names_no_site_at_its_line(python: str, tmp_path: Path) -> None:
    rec = drive(python, tmp_path, CONTROL, "heap", 500)
    line = _line(CONTROL, "CONTROL LINE")
    grown = _sites_at(rec["heap"]["sites"], tmp_path / "scenario.py", line)
    assert sum(s["size"] for s in grown) < 2000  # at most one block still in flight
    assert sum(s["size"] for s in rec["heap"]["sites"]) < 20000


@pytest.mark.parametrize("python", PYTHONS)
def test_stack_late_window_concentrates_in_the_function_that_slows(python: str,
                                                                   tmp_path: Path) -> None:
    rec = drive(python, tmp_path, SLOWING, "stack", 240, 10, 10)
    stack = rec["stack"]
    win = stack["windows"]
    assert (win["early"]["from"], win["early"]["to"]) == (0, 60)
    assert (win["late"]["from"], win["late"]["to"]) == (180, 240)
    assert win["early"]["samples"] > 5 and win["late"]["samples"] > 20

    def in_func(window: str, func: str) -> int:
        return sum(s[window] for s in stack["sites"] if s["frames"][0][2].endswith(func))
    late_share = in_func("late", "growing_work") / win["late"]["samples"]
    early_share = in_func("early", "growing_work") / max(1, win["early"]["samples"])
    # Late: ~6x the fixed work; early: a sixth of it.
    assert late_share > 0.7 and early_share < late_share - 0.3
    assert in_func("late", "growing_work") > 3 * in_func("late", "fixed_work")
    # Innermost first, down to the scenario's step; the agent's frames cut off.
    site = max(stack["sites"], key=lambda s: s["late"])
    assert [f[2] for f in site["frames"][:2]] == ["growing_work", "step"]
    assert not any(f[0].startswith(str(AGENT_DIR)) for s in stack["sites"] for f in s["frames"])
    assert "errors" not in rec


def test_stack_rate_from_the_environment_and_an_early_stop_said(tmp_path: Path) -> None:
    env = dict(__import__("os").environ, HARNESS_STACK_HZ="50")
    rec = drive(sys.executable, tmp_path, SLOWING, "stack", 400, 0, 10, 200, env=env)
    assert rec["stack"]["hz"] == 50.0 and rec["calls"] == 200
    assert "before the end of the late window" in rec["errors"]["stack"]


def test_frameworks_absent_are_errors_not_raises(tmp_path: Path) -> None:
    rec = drive(sys.executable, tmp_path, GROW % 10, "ops,device", 50)
    assert "neither tensorflow" in rec["errors"]["ops"]
    assert "torch is not imported" in rec["errors"]["device"]
    assert "ops" not in rec and "device" not in rec


def test_a_broken_framework_module_is_an_error_line(tmp_path: Path) -> None:
    # A `torch` without profiler or cuda (a broken install): each part says why.
    broken = "import sys, types\nsys.modules['torch'] = types.ModuleType('torch')\n" + GROW % 10
    rec = drive(sys.executable, tmp_path, broken, "ops,device,heap", 50)
    assert "AttributeError" in rec["errors"]["ops"] and "profiler" in rec["errors"]["ops"]
    assert "AttributeError" in rec["errors"]["device"] and "cuda" in rec["errors"]["device"]
    assert rec["heap"]["sites"]  # the other parts are unaffected


@pytest.mark.skipif(importlib.util.find_spec("memray") is not None,
                    reason="memray is importable here: the unavailable path cannot be taken")
def test_native_without_memray_says_unavailable(tmp_path: Path) -> None:
    rec = drive(sys.executable, tmp_path, GROW % 10, "native", 20)
    assert rec["native"] == {"unavailable": "memray is not importable in this image"}


@pytest.mark.skipif(importlib.util.find_spec("memray") is None,
                    reason="memray is not importable by this interpreter")
def test_native_names_the_growing_line(tmp_path: Path) -> None:
    size, calls = 3000, 300
    rec = drive(sys.executable, tmp_path, GROW % size, "native", calls)
    top = rec["native"]["sites"][0]
    assert [str(tmp_path / "scenario.py"), _line(GROW, "GROW LINE"), "step"] in top["frames"]
    assert size <= top["size"] / calls <= size + 200


def test_kinds_parsed_and_unknown_ones_named() -> None:
    sys.path.insert(0, str(AGENT_DIR))
    try:
        import attribution
    finally:
        sys.path.remove(str(AGENT_DIR))
    assert attribution.parse_kinds("all") == list(attribution.KINDS)
    assert attribution.parse_kinds("stack, heap") == ["heap", "stack"]
    with pytest.raises(ValueError, match=r"'bogus'.*heap,stack,ops,device,native"):
        attribution.parse_kinds("heap,bogus")
    where = attribution.make(["heap", "bogus"], "x.py")
    where.measure_start(0, lambda: 0)
    rec = where.measure_end(0)
    assert "unknown kind" in rec["errors"]["bogus"] and rec["kinds"] == ["heap"]


def _attribution() -> Any:
    """The agent's attribution module, loaded by its path as the agent loads it."""
    return load_file(AGENT_DIR / "attribution.py", "attribution_probe")


def test_the_step_call_line_is_found_in_the_stepper() -> None:
    """attribution.STEP_LINES: the stepper's `step(state)` lines, which tell a scenario's
    stack or allocation from the agent's own (its stop-file check, its sampler)."""
    mod = _attribution()
    path = AGENT_DIR / "attribution.py"
    stepper = (path.parent / "stepper.py").read_text().splitlines()
    assert mod.STEP_LINES and all(stepper[n - 1].strip() == "step(state)"
                                  for n in mod.STEP_LINES)
    agent = str(path.parent / "stepper.py")
    inside = [["/s/x.py", 3, "step"], [agent, min(mod.STEP_LINES), "steps"]]
    check = [["/usr/lib/python3/genericpath.py", 19, "exists"], [agent, 31, "due"],
             [agent, 101, "steps"]]
    assert mod.trim(inside) == [["/s/x.py", 3, "step"]]
    assert mod.trim(check) == []



BUSY = """
def setup(params):
    return {"n": 0}


def step(state):
    total = 0
    for i in range(20000):
        total += i
    state["n"] += total
"""


@pytest.mark.parametrize("python", PYTHONS)
def test_stack_samples_land_in_the_step_not_between_steps(python: str, tmp_path: Path) -> None:
    """The real agent, a pure-Python step of about a millisecond, a sample point every 10
    steps: the sampler waiting for the GIL got it where the stepping thread dropped it,
    the agent's stop-file check between steps (os.path.exists, a stat), so every sample
    was named `exists` (measured: 15 of 15 early, 20 of 20 late) and none the step's.
    Samples must land in the step, and none outside it be kept."""
    script = tmp_path / "scenario.py"
    script.write_text(textwrap.dedent(BUSY))
    out = tmp_path / "samples.jsonl"
    proc = subprocess.run([python, str(AGENT_DIR / "agent.py"), "--scenario", str(script),
                           "--out", str(out), "--iterations", "1000", "--warmup", "10",
                           "--sample-every", "10", "--no-gpu", "--quiet",
                           "--control", str(tmp_path / "stop"), "--attribute", "stack"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    [where] = [r for r in map(json.loads, out.read_text().splitlines())
               if r["type"] == "where"]
    stack = where["stack"]
    strays = [s["frames"] for s in stack["sites"] if s["frames"][-1][0] != str(script)]
    assert not strays, strays
    for window in ("early", "late"):
        in_step = sum(s[window] for s in stack["sites"])
        assert in_step == stack["windows"][window]["samples"] >= 10, stack


CHEAP = """
def setup(params):
    return {"n": 0}


def step(state):
    state["n"] += sum(range(40))
"""


@pytest.mark.parametrize("python", PYTHONS)
def test_a_budgeted_run_of_microsecond_steps_samples_its_windows_in_time(
        python: str, tmp_path: Path) -> None:
    """Issue 63: explain's run of a cheap step lasts a budget; its step count is only a
    cap, so the windows are the budget's first and last quarter. The stop file is looked
    at on its timer alone: at every sample point (10 steps of a few µs) its stat handed
    the sampler the GIL there, and nearly every sample was the agent's, not the step's."""
    script = tmp_path / "scenario.py"
    script.write_text(textwrap.dedent(CHEAP))
    out = tmp_path / "samples.jsonl"
    proc = subprocess.run([python, str(AGENT_DIR / "agent.py"), "--scenario", str(script),
                           "--out", str(out), "--iterations", "100000000", "--warmup", "10",
                           "--sample-every", "10", "--no-gpu", "--quiet", "--budget", "2",
                           "--budget-min", "300", "--max-overhead", "0.05",
                           "--control", str(tmp_path / "stop"), "--attribute", "stack"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    [where] = [r for r in map(json.loads, out.read_text().splitlines())
               if r["type"] == "where"]
    stack, windows = where["stack"], where["stack"]["windows"]
    assert windows["budget_s"] == 2 and "errors" not in where, where
    assert 0 == windows["early"]["from"] < windows["early"]["to"] < windows["late"]["from"]
    assert windows["late"]["from"] < windows["late"]["to"]
    # Every sample in a window is the step's. How many there are is the CPU the sampler
    # got: ~100 a window on a quiet host, 3 and 8 at a load of 26 on 2 cores, and none in
    # a first quarter the host took (3,743 steps there, 1.45 M in the last, beside a CI),
    # so a window may hold none; the two together hold some.
    for window in ("early", "late"):
        in_step = sum(s[window] for s in stack["sites"])
        assert in_step == windows[window]["samples"], stack
    assert windows["early"]["samples"] + windows["late"]["samples"] >= 2, stack
