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
