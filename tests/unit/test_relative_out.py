"""The README's demo writes to the default, relative `reports/`: cells must still find
their output although the local runtime runs the agent in the scenario's directory."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.cli import main

LEAKY = '''
def setup(params):
    return {"keep": []}
def step(state):
    state["keep"].append(bytearray(16384))
'''


def test_relative_out_dir_with_the_local_runtime(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "scen").mkdir()
    (tmp_path / "scen" / "leaky.py").write_text(LEAKY)
    (tmp_path / "m.yaml").write_text(
        f"name: rel\nruntime: local\ndefaults: {{iterations: 200, warmup: 10}}\n"
        f"matrix:\n  image: [{{name: py, python: {sys.executable}}}]\n"
        f"  scenario: [scen/leaky.py]\n")
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", "m.yaml", "-q"]) == 1  # default --out is the relative reports/
    [results] = list(Path("reports/rel").glob("*/results.json"))
    cell = json.loads(results.read_text())["cells"]["py.cpu.leaky"]
    assert cell["verdict"] == "leak", cell["reason"]
