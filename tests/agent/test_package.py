"""The agent is a few modules beside agent.py, imported by their plain names: they must
not stand in for a scenario's own modules of the same names."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_agent import AGENT_DIR, OLDEST, run_agent, scenario

SHADOWED = """
import fields
import loop


def setup(params):
    return {"fields": fields.WHO, "loop": loop.WHO}


def step(state):
    pass


def info(state):
    return state
"""


@pytest.mark.parametrize("python", [OLDEST, pytest.param(sys.executable, id="current")])
def test_a_scenarios_own_modules_are_not_the_agents(python: str, tmp_path: Path) -> None:
    # GIVEN a scenario that imports its own fields.py and loop.py, names of agent modules
    for name in ("fields", "loop"):
        assert (AGENT_DIR / f"{name}.py").exists()
        (tmp_path / f"{name}.py").write_text(f"WHO = 'the scenario\\'s {name}'\n")
    script = scenario(tmp_path, SHADOWED)
    # WHEN the agent runs it
    proc, records = run_agent(python, script, tmp_path)
    # THEN the scenario got its own modules
    assert proc.returncode == 0, proc.stderr
    assert records[-1]["info"] == {"fields": "the scenario's fields", "loop": "the scenario's loop"}
