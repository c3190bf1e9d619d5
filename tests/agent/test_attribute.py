"""`--attribute KINDS`: the agent's hooks into its sibling module `attribution`, run
with a fake attribution module beside a copy of the agent (the real one is issue 23's).

The fake logs every hook call into its where record, so the tests see when and with what
the agent called it; FAKE_ATTRIBUTION makes it fail at one hook instead.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_agent import AGENT_DIR, OLDEST, STABLE, scenario, step_samples
from test_fields import unknown_fields

from harness.agent import fields
from harness.protocol.ingest import read_samples

FAKE = '''
import os
import signal

MODE = os.environ.get("FAKE_ATTRIBUTION", "ok")
if MODE == "import":
    raise ImportError("memray is not importable in this image")
open(os.environ["FAKE_ATTRIBUTION_MARK"], "w").close()


class Fake(object):
    def __init__(self, kinds, path):
        self.kinds, self.path, self.calls, self.progress = kinds, path, [], None

    def measure_start(self, count, progress, budget=0.0, least=0):
        self.progress = progress
        self.calls.append(["start", count, progress()])

    def at_sample(self, done):
        self.calls.append(["sample", done, self.progress()])
        if MODE == "sample" and len(self.calls) == 3:
            raise RuntimeError("stack sampler died")
        if MODE == "term" and len(self.calls) == 3:
            os.kill(os.getpid(), signal.SIGTERM)

    def measure_end(self, done):
        self.calls.append(["end", done, self.progress()])
        if MODE == "end":
            raise MemoryError("snapshot too large")
        if MODE == "list":
            return self.calls
        return {"type": "where", "kinds": self.kinds, "calls": done, "frames": 8,
                "heap": {"scenario": self.path, "log": self.calls}, "errors": {}}


def make(kinds, path):
    if MODE == "make":
        raise RuntimeError("tracemalloc is off")
    return Fake(kinds, path)
'''
PYTHONS = [OLDEST, pytest.param(sys.executable, id="current")]


def agent_with_fake(tmp_path: Path, fake: bool = True) -> Path:
    """A copy of the agent's directory, with the fake attribution module beside it."""
    where = tmp_path / "agent"
    shutil.copytree(AGENT_DIR, where, ignore=shutil.ignore_patterns("__pycache__"))
    (where / "attribution.py").unlink(missing_ok=True)   # the real one, once it is there
    if fake:
        (where / "attribution.py").write_text(FAKE)
    return where / "agent.py"


def run(python: str, tmp_path: Path, *extra: str, text: str = STABLE, mode: str = "ok",
        fake: bool = True, iterations: int = 40,
        params: dict[str, Any] | None = None) -> tuple[int, list[dict[str, Any]], str]:
    agent = agent_with_fake(tmp_path, fake)
    script = scenario(tmp_path, text)
    out = tmp_path / "samples.jsonl"
    env = {**os.environ, "FAKE_ATTRIBUTION": mode,
           "FAKE_ATTRIBUTION_MARK": str(tmp_path / "imported")}
    proc = subprocess.run([python, str(agent), "--scenario", str(script), "--out", str(out),
                           "--iterations", str(iterations), "--warmup", "10",
                           "--sample-every", "10", "--no-gpu", "--quiet",
                           "--params", json.dumps(params or {}), *extra],
                          capture_output=True, text=True, timeout=60, env=env)
    records = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return proc.returncode, records, proc.stderr


@pytest.mark.parametrize("python", PYTHONS)
def test_the_hooks_are_called_at_the_measured_phase(python: str, tmp_path: Path) -> None:
    # GIVEN the agent with attribution, 10 warm-up and 40 measured steps sampled every 10
    rc, records, err = run(python, tmp_path, "--attribute", "heap,stack")
    assert rc == 0, err
    # THEN one where record, just before the end, with the module's own fields
    assert [r["type"] for r in records][-2:] == ["where", "end"]
    assert [r["type"] for r in records].count("where") == 1
    where = records[-2]
    assert where["kinds"] == ["heap", "stack"] and where["calls"] == 40
    assert where["heap"]["scenario"] == str(tmp_path / "scenario.py")
    # measure_start(planned steps, progress) before the first measured step, at_sample at
    # each measured sample point (progress() agrees), measure_end after the last step
    measured = [s["i"] - 10 for s in step_samples(records, "measure")]
    assert measured == [10, 20, 30, 40]
    assert where["heap"]["log"] == ([["start", 40, 0]]
                                    + [["sample", d, d] for d in measured] + [["end", 40, 40]])
    assert not unknown_fields(records)


def test_measure_end_follows_an_early_stop(tmp_path: Path) -> None:
    control = tmp_path / "stop"
    text = STABLE.replace('state["n"] += 1', 'state["n"] += 1\n    if state["n"] == 35:\n'
                          '        open(state["payload"], "w").close()')
    rc, records, err = run(sys.executable, tmp_path, "--attribute", "heap", "--control",
                           str(control), text=text, iterations=1000,
                           params={"payload": str(control)})
    assert rc == 0, err
    end, where = records[-1], records[-2]
    assert end["stopped_early"] is True and end["iterations"] == 30
    assert where["heap"]["log"][-1] == ["end", 30, 30]


def test_measure_end_follows_a_step_that_raises(tmp_path: Path) -> None:
    text = STABLE.replace('state["n"] += 1', 'state["n"] += 1\n    if state["n"] == 25:\n'
                          '        raise ValueError("boom")')
    rc, records, _ = run(sys.executable, tmp_path, "--attribute", "heap", text=text)
    assert rc == 1 and records[-1]["status"] == "error"
    # 10 warm-up steps, 14 measured ones done when the 15th raised
    assert records[-2]["type"] == "where" and records[-2]["heap"]["log"][-1] == ["end", 14, 14]


@pytest.mark.parametrize(("mode", "error"), [
    ("make", "RuntimeError: tracemalloc is off"),
    ("import", "ImportError: memray is not importable in this image"),
    ("sample", "RuntimeError: stack sampler died"),
    ("end", "MemoryError: snapshot too large"),
    ("list", "TypeError: measure_end returned list, not a dict")])
@pytest.mark.parametrize("python", PYTHONS)
def test_attribution_that_fails_leaves_the_run_as_it_was(python: str, tmp_path: Path,
                                                         mode: str, error: str) -> None:
    # GIVEN attribution that raises in one hook
    rc, records, err = run(python, tmp_path, "--attribute", "all", mode=mode)
    # THEN the run ends well, with every sample, and the where record says why
    assert rc == 0, err
    assert records[-1]["status"] == "ok" and records[-1]["iterations"] == 40
    assert len(step_samples(records, "measure")) == 4
    assert records[-2] == {"type": "where", "kinds": list(fields.WHERE_KINDS),
                           "errors": {"all": error}}


def test_no_attribution_module(tmp_path: Path) -> None:
    rc, records, err = run(OLDEST.values[0] if not OLDEST.marks else sys.executable,
                           tmp_path, "--attribute", "ops", fake=False)
    assert rc == 0, err
    assert records[-2] == {"type": "where", "kinds": ["ops"], "errors": {
        "all": "ModuleNotFoundError: No module named 'attribution'"}}


def test_without_attribute_nothing_is_imported_or_written(tmp_path: Path) -> None:
    rc, records, err = run(sys.executable, tmp_path)
    assert rc == 0, err
    assert "where" not in [r["type"] for r in records]
    assert not (tmp_path / "imported").exists()


def test_a_plain_script_has_no_measured_phase(tmp_path: Path) -> None:
    rc, records, err = run(sys.executable, tmp_path, "--attribute", "heap",
                           text="print('hello')\n")
    assert rc == 0, err
    assert records[-2]["errors"] == {"all": "a plain script (no setup/step) has no "
                                            "measured phase"}
    assert not (tmp_path / "imported").exists()


def test_sigterm_in_a_hook_still_ends_the_run(tmp_path: Path) -> None:
    # GIVEN a SIGTERM that arrives while at_sample runs: the agent's own signal
    rc, records, _ = run(sys.executable, tmp_path, "--attribute", "heap", mode="term")
    # THEN attribution does not swallow it: the run ends, as on any SIGTERM
    assert rc == 1
    assert records[-1]["error"]["type"] == "Terminated"
    assert f"signal {int(signal.SIGTERM)}" in records[-1]["error"]["message"]
    assert records[-2]["type"] == "where"


def test_unknown_kind_is_bad_input(tmp_path: Path) -> None:
    rc, records, err = run(sys.executable, tmp_path, "--attribute", "heap,gpu")
    assert rc == 2 and records == []
    assert "--attribute: unknown kind gpu; the kinds are heap,stack,ops,device,native" in err


def test_the_reader_keeps_the_where_record(tmp_path: Path) -> None:
    # GIVEN a samples file with a where record
    rc, _records, err = run(sys.executable, tmp_path, "--attribute", "heap")
    assert rc == 0, err
    # THEN the host's reader keeps it, and reports no problem
    series = read_samples(tmp_path / "samples.jsonl")
    assert series.problems == []
    assert series.where is not None and series.where["calls"] == 40
