"""Issue 42 item 6: the scenario's faults are the scenario's. A protocol name the agent
cannot call (`step = 5`, `def step():`) is exit 2 naming the file and the name before
any image is prepared; one only the agent can see (a `step` made by a call) is marked
`fault: scenario` in the end record, the row says the scenario is at fault, naming the
file, and the sweep stops at the first such cell instead of running every image."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakeruntime import FakeRuntime

from harness.cli import main
from harness.errors import EXIT_BAD_INPUT

SETUP = "def setup(params):\n    return None\n\n\n"
# Seen on the host: the agent would be asked to call these and could not.
STATIC = {
    "step = 5": SETUP + "step = 5\n",
    "def step():": SETUP + "def step():\n    pass\n",
    "def setup()": "def setup():\n    return None\n\n\ndef step(state):\n    pass\n",
    "step of two": SETUP + "def step(state, other):\n    pass\n",
    "lambda": SETUP + "step = lambda: None\n",
}
# Seen only once imported: `step` is whatever make() returns, a function of no argument.
MADE = SETUP + "def make():\n    return lambda: None\n\n\nstep = make()\n"


def matrix(where: Path, scenario: str, images: int, runtime: str = "local") -> Path:
    (where / "s.py").write_text(scenario)
    names = ", ".join(f"{{name: v{i}, python: python3}}" for i in range(1, images + 1))
    (where / "m.yaml").write_text(
        f"name: fault\nruntime: {runtime}\n"
        "defaults: {iterations: 60, warmup: 2, sample_every: 2, repeats: 0, rounds: 0}\n"
        f"matrix:\n  image: [{names}]\n  scenario: [s.py]\n")
    return where / "m.yaml"


@pytest.mark.parametrize("images", [1, 3])
@pytest.mark.parametrize("case", sorted(STATIC))
def test_an_uncallable_protocol_is_refused_before_any_image(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], case: str, images: int) -> None:
    # GIVEN a scenario whose step or setup the agent cannot call, over 1 or 3 images
    runtime = FakeRuntime(lambda c: pytest.fail("no cell may run"))
    monkeypatch.setattr("harness.runtimes.get_runtime",
                        lambda name, docker_host=None: runtime)
    monkeypatch.chdir(tmp_path)
    path = matrix(tmp_path, STATIC[case], images)
    # WHEN it is swept
    code = main(["sweep", str(path), "-q"])
    err = capsys.readouterr().err
    # THEN bad input, naming the file, the line and the name, with a fix; nothing prepared
    assert code == EXIT_BAD_INPUT, err
    name = "setup" if "setup()" in case else "step"
    assert f"{tmp_path / 's.py'}:" in err and f"{name}(" in err, err
    assert "fix: " in err
    assert runtime.prepared == [] and runtime.runs == []


@pytest.mark.parametrize("images", [1, 3])
def test_a_step_the_agent_cannot_call_is_the_scenarios_fault(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], images: int) -> None:
    # GIVEN a scenario whose step, made by a call, takes no argument (the host cannot
    # see it), over 1 or 3 images of the local runtime: the real agent runs it
    monkeypatch.chdir(tmp_path)
    path = matrix(tmp_path, MADE, images)
    # WHEN it is swept
    code = main(["sweep", str(path)])
    out, err = capsys.readouterr()
    # THEN the scenario is at fault (exit 2), never "bad from the first image" ...
    assert code == EXIT_BAD_INPUT, out + err
    assert "bad from the first image" not in out + err
    assert "the scenario's fault, not the image's" in out, out
    assert f"{tmp_path / 's.py'}: `step" in out, out
    assert "exit 4" not in out, out
    # ... the end record says so ...
    (run,) = (tmp_path / "reports" / "fault").iterdir()
    ran = sorted(p.parent.name for p in run.glob("cells/*/result.json"))
    result = json.loads((run / "cells" / ran[0] / "result.json").read_text())
    assert result["end"]["error"]["fault"] == "scenario"
    # ... and only the first image ran: the others would fail the same way
    assert len(ran) == 1, ran
    if images > 1:
        assert f"its {images - 1} other cells are not run" in err, err
