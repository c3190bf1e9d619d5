"""Issue 35 item 3, the agent's side: a scenario with one of setup()/step() but not the
other (a misspelled `def stpe`), or whose step calls sys.exit(), ends as an error naming
the file and what is missing, never as a whole script or an "ok" run of no calls."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_agent import INTERPRETERS, OLDEST, run_agent, scenario

MISTAKES = {
    "misspelled step": ("def setup(params):\n    return []\n\n\ndef stpe(state):\n"
                        "    state.append(1)\n",
                        "defines setup() but no step() (is `stpe` meant to be `step`?)"),
    "no setup": ("def step(state):\n    pass\n", "defines step() but no setup()"),
    "step exits": ("import sys\n\n\ndef setup(params):\n    return []\n\n\n"
                   "def step(state):\n    sys.exit(0)\n",
                   ":9: step() calls sys.exit(), which ends the run"),
}


@pytest.mark.parametrize("python", INTERPRETERS)
@pytest.mark.parametrize("case", MISTAKES)
def test_a_scenario_mistake_is_an_error_naming_the_file(tmp_path: Path, python: str,
                                                        case: str) -> None:
    text, words = MISTAKES[case]
    script = scenario(tmp_path, text)
    # WHEN the agent runs it
    proc, records = run_agent(python, script, tmp_path)
    # THEN it ends with an error naming the file and what is wrong, and ran no call
    end = records[-1]
    assert end["type"] == "end" and end["status"] == "error", records[-1]
    assert str(script) in end["error"]["message"] and words in end["error"]["message"]
    assert end.get("mode") != "script" and end["iterations"] == 0
    assert end["error"]["fault"] == "scenario"
    assert proc.returncode == 1


def test_an_exit_the_ast_cannot_see_is_still_an_error(tmp_path: Path) -> None:
    # GIVEN a step that exits through a helper (no sys.exit in its own body)
    script = scenario(tmp_path, "import sys\n\n\ndef leave():\n    sys.exit(0)\n\n\n"
                                "def setup(params):\n    return []\n\n\n"
                                "def step(state):\n    leave()\n")
    _, records = run_agent(OLDEST.values[0], script, tmp_path)
    # THEN the run is an error saying the exit, not "ok" with no calls
    end = records[-1]
    assert end["status"] == "error" and end["error"]["type"] == "SystemExit"
    assert "sys.exit(0) during warmup" in end["error"]["message"]


# Issue 42 item 6: a protocol name the agent cannot call is the scenario's fault.
UNCALLABLE = {
    "step = 5": ("step = 5\n", "`step` is 5 (an int), not a function"),
    "step made of no argument": ("def make():\n    return lambda: None\n\n\nstep = make()\n",
                                 "cannot be called as step(state)"),
    "info = {}": ("def step(state):\n    pass\n\n\ninfo = {}\n",
                  "`info` is {} (a dict), not a function"),
}
SETUP = "def setup(params):\n    return []\n\n\n"


@pytest.mark.parametrize("python", INTERPRETERS)
@pytest.mark.parametrize("case", UNCALLABLE)
def test_a_protocol_name_it_cannot_call_is_the_scenarios_fault(
        tmp_path: Path, python: str, case: str) -> None:
    text, words = UNCALLABLE[case]
    script = scenario(tmp_path, SETUP + text)
    # WHEN the agent runs it
    _, records = run_agent(python, script, tmp_path)
    # THEN before setup(), an error naming the file and the name, marked the scenario's
    end = records[-1]
    assert end["status"] == "error" and end["error"]["fault"] == "scenario", end
    assert end["error"]["message"].startswith(str(script)) and words in \
        end["error"]["message"], end["error"]["message"]
    assert "setup" not in end["phases"]


def test_a_call_that_fails_at_the_agents_frame_is_the_scenarios_fault(
        tmp_path: Path) -> None:
    # GIVEN a step whose signature says one argument but whose call takes none: only
    # the call itself can fail, in the agent's frame, before the scenario's code runs
    script = scenario(tmp_path, SETUP + (
        "import inspect\n\n\nclass Step(object):\n    def __call__(self):\n"
        "        pass\n\n\nstep = Step()\nstep.__signature__ = inspect.Signature("
        "[inspect.Parameter('state', inspect.Parameter.POSITIONAL_ONLY)])\n"))
    _, records = run_agent(OLDEST.values[0], script, tmp_path)
    end = records[-1]
    # THEN the error names the file and step, and says it is the scenario's fault
    assert end["error"]["fault"] == "scenario", end
    assert end["error"]["message"].startswith(f"{script}: step could not be called")


@pytest.mark.parametrize("python", [OLDEST])
def test_a_type_error_inside_the_step_is_no_fault_of_the_protocol(
        tmp_path: Path, python: str) -> None:
    # GIVEN a step that raises TypeError in its own code (a finding, maybe the image's)
    script = scenario(tmp_path, SETUP + "def step(state):\n    len(5)\n")
    _, records = run_agent(python, script, tmp_path)
    # THEN an error, not marked as the scenario's fault
    end = records[-1]
    assert end["error"]["type"] == "TypeError" and "fault" not in end["error"], end
