"""The end record's `params_read`: the keys of params the scenario read (setup and its
steps), which `harness fit` checks its param against (tests/unit/test_honest_exits.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_agent import INTERPRETERS, OLDEST, run_agent, scenario

READS = """
def setup(params):
    n = params["batch"] + params.get("absent", 0)
    if "flag" in params:
        n += 1
    return {"params": params, "n": n}


def step(state):
    state["params"]["late"]        # a key read in a step counts too
"""

UNPACKS = """
def make(batch, keys, unused):
    return batch


def setup(params):
    return make(**params)


def step(state):
    pass
"""


@pytest.mark.parametrize("python", [OLDEST, INTERPRETERS[-1]])
def test_the_keys_the_scenario_read_are_in_the_end_record(python: str,
                                                            tmp_path: Path) -> None:
    params = {"batch": 2, "late": 1, "never": 3}
    proc, records = run_agent(python, scenario(tmp_path, READS), tmp_path, params=params)
    assert proc.returncode == 0, proc.stderr
    # a missing key asked for (get, in) is read too; "never" is not
    assert records[-1]["params_read"] == ["absent", "batch", "flag", "late"]


@pytest.mark.parametrize("python", [OLDEST, INTERPRETERS[-1]])
def test_unpacking_reads_every_key(python: str, tmp_path: Path) -> None:
    params = {"batch": 2, "keys": 1, "unused": 0}
    proc, records = run_agent(python, scenario(tmp_path, UNPACKS), tmp_path, params=params)
    assert proc.returncode == 0, proc.stderr
    assert records[-1]["params_read"] == ["batch", "keys", "unused"]


def test_a_plain_script_records_none(tmp_path: Path) -> None:
    # a script is run whole: it is handed no params, so nothing is said of them
    proc, records = run_agent(INTERPRETERS[-1].values[0],
                              scenario(tmp_path, "x = 1\n"), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert records[-1]["type"] == "end" and "params_read" not in records[-1]
