"""Issue 35 item 3: the scenario's output is capped (agent.log): a scenario printing
100 KB per call leaves the cap and a note of what was dropped, not everything."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_agent import INTERPRETERS, run_agent, scenario

from harness.agent.output import CAP_BYTES

LOUD = ("import os\nimport sys\n\n\ndef setup(params):\n    return []\n\n\n"
        "def step(state):\n    print('x' * 50000)\n"
        "    os.write(2, b'y' * 50000 + b'\\n')   # as a library's C code writes\n")


@pytest.mark.parametrize("python", INTERPRETERS)
def test_a_loud_scenario_leaves_the_cap_and_a_note(tmp_path: Path, python: str) -> None:
    # GIVEN a scenario writing ~100 KB per call, 120 calls (~12 MB), through print and fd 2
    script = scenario(tmp_path, LOUD)
    # WHEN the agent runs it
    proc, records = run_agent(python, script, tmp_path, "--quiet", iterations=110,
                              warmup=10)   # --quiet: as the host runs it
    end = records[-1]
    assert end["status"] == "ok", end
    written = 120 * (50001 + 50001)
    # THEN what reached the log is the cap (and the notes), the rest is counted
    log = proc.stdout + proc.stderr     # agent.log holds both
    assert CAP_BYTES <= len(log) <= CAP_BYTES + 1000
    assert end["output_dropped"] == written - CAP_BYTES
    assert f"harness: {written - CAP_BYTES} bytes of the scenario's output dropped" in log
    assert "is capped at 4 MiB" in log


def test_a_quiet_scenario_keeps_all_its_output_in_order(tmp_path: Path) -> None:
    script = scenario(tmp_path, "import os\n\n\ndef setup(params):\n    print('set up')\n"
                                "    return []\n\n\ndef step(state):\n    pass\n\n\n"
                                "def teardown(state):\n    os.write(1, b'torn down\\n')\n")
    proc, records = run_agent(INTERPRETERS[0].values[0], script, tmp_path, "--quiet")
    assert "output_dropped" not in records[-1]
    assert proc.stdout.index("set up") < proc.stdout.index("torn down")
