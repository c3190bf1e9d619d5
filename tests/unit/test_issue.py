"""The bug report draft for one row (golden file), and its bootstrap interval on real samples."""

from __future__ import annotations

import dataclasses
import io
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakeruntime import Behaviour
from sweepkit import FakeSweep

from harness.errors import InputError
from harness.report import IssueReporter, Report
from harness.report.issue import ratio_ci
from tests.resultkit import as_results

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("HARNESS_UPDATE_GOLDEN") == "1"
SCRIPT = '''"""tf.signal.rfft in a session.run loop."""


def setup(params):
    import tensorflow as tf
    return tf.compat.v1.Session(), tf.signal.rfft(tf.random.normal([256]))


def step(state):
    state[0].run(state[1])
'''


def cell(label: str, index: int, verdict: str, reason: str, tf: str, cuda: str,
         slope: float, median_s: float) -> dict[str, Any]:
    return {
        "schema": 1, "id": f"{label}.gpu0.rfft_loop", "row": "gpu0.rfft_loop",
        "verdict": verdict, "reason": reason, "runtime": "docker",
        "image": {"label": label, "index": index, "ref": f"nvcr.io/nvidia/tensorflow:{label}",
                  "digest": f"sha256:{label[:5]}"},
        "gpu": {"value": "0", "label": "gpu0"},
        "scenario": {"id": "rfft_loop", "script": "scenarios/rfft_loop.py",
                     "params": {"input": "random"}},
        "settings": {"iterations": 2000, "warmup": 200},
        "carrier": "heap",
        "memory": {"heap": {"n": 180, "slope": slope, "slope_lo": slope - 300.0,
                            "slope_hi": slope + 300.0, "growth": slope * 2000,
                            "kind": "leak" if slope else "stable"}},
        "steps": {"median_s": median_s, "ratio": 1.01, "p_value": 0.4},
        "summary": {"median_step_s": median_s},
        "fingerprint": {"python": "3.8.10", "platform": "Linux-5.15-x86_64-with-glibc2.31",
                        "heap": "mallinfo2",
                        "env": {"CUDA_VERSION": cuda, "CUDNN_VERSION": "8.7.0.84",
                                "NCCL_VERSION": "2.15.5"},
                        "packages": {"nvidia-tensorflow": tf, "numpy": "1.21.1",
                                     "requests": "2.28"},
                        "gpu": {"devices": [{"name": "NVIDIA GeForce RTX 3090", "cc": [8, 6]}],
                                "driver": "535.104.05"}},
    }


@pytest.fixture
def report(tmp_path: Path) -> Report:
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "rfft_loop.py").write_text(SCRIPT)
    cells = [cell("20.12-tf1-py3", 0, "ok", "memory stable, no slowdown", "1.15.4+nv20.12",
                  "11.1.1", 0.0, 0.0011),
             cell("22.12-tf1-py3", 1, "leak", "heap grows +23.0 KiB/call",
                  "1.15.5+nv22.12", "11.8.0", 23 * 1024.0, 0.0019)]
    return Report.from_results("tf1-rfft", as_results({c["id"]: c for c in cells}),
                               {"matrix": str(tmp_path / "matrix.yaml")})


def render(report: Report, row: str = "gpu0.rfft_loop") -> str:
    out = io.StringIO()
    IssueReporter.from_results(report, row).render(out)
    return out.getvalue()


def test_issue_golden(report: Report) -> None:
    text = render(report)
    golden = GOLDEN / "issue.md"
    if UPDATE:
        golden.write_text(text)
    assert text == golden.read_text(), "issue.md changed; HARNESS_UPDATE_GOLDEN=1 to accept"


def test_issue_has_what_a_maintainer_asks_for(report: Report) -> None:
    text = render(report)
    assert text.startswith("# rfft_loop leaks memory in 22.12-tf1-py3 (not in 20.12-tf1-py3)")
    for needed in ("nvidia-tensorflow 1.15.5+nv22.12", "CUDA: 11.8.0", "cuDNN: 8.7.0.84",
                   "RTX 3090 (compute capability 8.6)", "driver: 535.104.05",
                   "sha256:22.12", "state[0].run(state[1])", "(CI +22.71..+23.29)"):
        assert needed in text, needed


def test_script_not_found_says_where_it_looked(report: Report, tmp_path: Path) -> None:
    (tmp_path / "scenarios" / "rfft_loop.py").unlink()
    assert "(script not found; looked at " in render(report)


@pytest.mark.parametrize(("row", "message"), [
    ("gpu9.nope", "--issue gpu9.nope: no such row (allowed values: gpu0.rfft_loop)"),
])
def test_unknown_row(report: Report, row: str, message: str) -> None:
    with pytest.raises(InputError, match=r"no such row") as info:
        render(report, row)
    assert str(info.value) == message


def test_row_without_bad_cell(report: Report) -> None:
    clean = Report.from_results("x", {k: dataclasses.replace(v, verdict="ok") for k, v in
                                      report.results.items()})
    with pytest.raises(InputError, match="has no bad cell"):
        render(clean)


def test_ratio_ci_brackets_the_true_ratio() -> None:
    rng = np.random.default_rng(3)
    base = rng.normal(1e-3, 5e-5, 5000)
    other = rng.normal(2e-3, 1e-4, 5000)
    ratio, lo, hi = ratio_ci(base, other)
    assert lo < 2.0 < hi and hi - lo < 0.02 and lo < ratio < hi


def test_issue_from_a_sweep_has_a_bootstrap_interval(fake_sweep: FakeSweep) -> None:
    run = fake_sweep(["v1", "v2"], {"v2": Behaviour(step_s=0.002)}, name="iss")
    report = Report.from_results("iss", run.results, {"matrix": str(run.path)}, run.root)
    text = render(report, "gpu0.loop")
    assert text.startswith("# loop is slower in v2 (not in v1)")
    found = re.search(r"Step time, first bad vs last good: (\S+)x \(95% bootstrap CI "
                      r"(\S+)\.\.(\S+), 300 and 300 steps\)", text)
    assert found is not None, text
    ratio, lo, hi = (float(x) for x in found.groups())
    assert 1.9 < lo <= ratio <= hi < 2.1
    assert "def step(state):" in text


def test_issue_accepts_a_cell_id_and_has_no_python_reprs() -> None:
    """Issue 21 point 5: `--issue` takes a cell id too; no repr of the heap reading."""
    from harness.report.issue import plain

    assert plain({"func": "mallinfo2", "note": None}) == "func mallinfo2, note -"
    assert plain(["a", 1]) == "a, 1"


# ------------------------------------------------------------------ issue 51: exact pins
GOOD_DAY = {"aiohttp": "3.11.18", "multidict": "6.4.3", "yarl": "1.20.0", "pip": "25.1"}
BAD_DAY = {"aiohttp": "3.12.14", "multidict": "6.6.3", "yarl": "1.20.1", "pip": "25.1"}
POP = '"""MultiDict.pop() in a loop."""\n\n\ndef setup(params):\n    return None\n\n\n' \
      'def step(state):\n    pass\n'


def dated(day: str, index: int, verdict: str, packages: dict[str, str],
          with_flags: bool = True) -> dict[str, Any]:
    pins = " ".join(f"{n}=={v}" for n, v in sorted(packages.items()) if n != "pip")
    labels = {"as_of": day, "requirements": "aiohttp", "pins": pins, "venv": "/v/x"}
    if with_flags:
        labels["resolved_with"] = f"uv pip compile --exclude-newer {day}T00:00:00Z"
    slope = 5.8 * 1024 if verdict == "leak" else 0.0
    return {
        "schema": 1, "id": f"aiohttp@{day}.cpu.multidict_pop", "row": "cpu.multidict_pop",
        "verdict": verdict, "reason": "heap grows" if slope else "memory stable",
        "runtime": "local",
        "image": {"label": f"aiohttp@{day}", "index": index, "ref": "aiohttp",
                  "digest": f"venv:{day}", "labels": labels, "pip": ["aiohttp"]},
        "gpu": {"value": "none", "label": "cpu"},
        "scenario": {"id": "multidict_pop", "script": "scenarios/multidict_pop.py",
                     "params": {"keys": 100}},
        "settings": {"iterations": 300, "warmup": 30, "sample_every": 10},
        "carrier": "heap",
        "memory": {"heap": {"n": 30, "slope": slope, "slope_lo": slope - 10,
                            "slope_hi": slope + 10, "growth": slope * 300,
                            "kind": "leak" if slope else "stable"}},
        "fingerprint": {"python": "3.12.3", "platform": "Linux-6.8-x86_64",
                        "packages": dict(packages)},
    }


def dated_report(tmp_path: Path, culprit: dict[str, Any] | None = None,
                 with_flags: bool = True) -> Report:
    (tmp_path / "scenarios").mkdir(exist_ok=True)
    (tmp_path / "scenarios" / "multidict_pop.py").write_text(POP)
    cells = [dated("2025-05-15", 0, "ok", GOOD_DAY, with_flags),
             dated("2025-07-15", 1, "leak", BAD_DAY, with_flags)]
    results = as_results({c["id"]: c for c in cells})
    if culprit is not None:
        import json

        where = tmp_path / "culprit" / "cpu.multidict_pop"
        where.mkdir(parents=True, exist_ok=True)
        (where / "culprit.json").write_text(json.dumps(culprit))
    return Report.from_results("asof", results, {"matrix": str(tmp_path / "asof.yaml")},
                               tmp_path)


def section(text: str, title: str) -> str:
    """The body of the draft's `## title` section."""
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def test_a_dated_first_bad_image_drafts_the_exact_pins_of_both_sides_and_the_day(
        tmp_path: Path) -> None:
    text = render(dated_report(tmp_path), "cpu.multidict_pop")
    # the exact pins, never `pip install aiohttp` (today's release)
    assert "pip install aiohttp==3.12.14 multidict==6.6.3 yarl==1.20.1" in text, text
    assert "pip install aiohttp==3.11.18 multidict==6.4.3 yarl==1.20.0" in text, text
    assert "pip install aiohttp\n" not in text and "pip install aiohttp " not in text
    assert "pip==" not in text      # the installer is not part of the environment
    # the day each side was resolved on, and the resolver's flags
    env = section(text, "Exact environments")
    for day in ("2025-05-15", "2025-07-15"):
        assert f"`uv pip compile --exclude-newer {day}T00:00:00Z`" in env, env
    assert "cpu.multidict_pop" in text and "multidict_pop.py" in env
    # the harness command, and a matrix that pins both sides exactly and loads
    import yaml

    from harness import matrixfile

    repro = section(text, "Reproduce with harness")
    assert "harness sweep repro.yaml" in repro
    doc = yaml.safe_load(repro.split("```yaml\n", 1)[1].split("```", 1)[0])
    (tmp_path / "multidict_pop.py").write_text(POP)
    (tmp_path / "repro.yaml").write_text(yaml.safe_dump(doc))
    loaded = matrixfile.load(tmp_path / "repro.yaml")
    assert [i.pip for i in loaded.images] == [
        ("aiohttp==3.11.18", "multidict==6.4.3", "yarl==1.20.0"),
        ("aiohttp==3.12.14", "multidict==6.6.3", "yarl==1.20.1")]
    assert {c.scenario.params["keys"] for c in loaded.cells} == {100}


def test_a_result_without_recorded_flags_still_says_the_day_and_how_it_resolves(
        tmp_path: Path) -> None:
    env = section(render(dated_report(tmp_path, with_flags=False), "cpu.multidict_pop"),
                  "Exact environments")
    assert "`uv pip compile --exclude-newer 2025-07-15T00:00:00Z`" in env, env
    assert "--uploaded-prior-to 2025-07-15T00:00:00Z" in env, env


def test_a_draft_beside_a_culprit_note_quotes_it_and_installs_the_same_versions(
        tmp_path: Path) -> None:
    from harness.result.model import DerivedFrom

    sentence = ("cause: multidict 6.4.3 -> 6.6.3. B with multidict 6.4.3: ok; G with "
                "multidict 6.6.3: leak. Workaround: pin multidict==6.4.3 in B.")
    report = dated_report(tmp_path)
    keys = DerivedFrom.of(report.results, list(report.results)).to_json()
    report = dated_report(tmp_path, {"row": "cpu.multidict_pop", "status": "found",
                                     "sentence": sentence, "probes": [],
                                     "derived_from": keys})
    text = render(report, "cpu.multidict_pop")
    cause = section(text, "Cause")
    assert sentence in cause, cause
    # the reproduction installs the versions the culprit names, on each side
    bad_install = next(t for t in text.splitlines() if "bad/bin/activate" in t)
    good_install = next(t for t in text.splitlines() if "good/bin/activate" in t)
    assert "multidict==6.6.3" in bad_install and "multidict==6.4.3" in good_install


def test_a_stale_culprit_note_is_left_out_of_the_draft_and_said(tmp_path: Path) -> None:
    report = dated_report(tmp_path, {"row": "cpu.multidict_pop", "status": "found",
                                     "sentence": "cause: yarl 1.20.0 -> 1.20.1.",
                                     "probes": [], "derived_from": {
                                         "aiohttp@2025-07-15.cpu.multidict_pop": "0" * 16}})
    text = render(report, "cpu.multidict_pop")
    assert "yarl 1.20.0 -> 1.20.1." not in text
    cause = section(text, "Cause")
    assert "left out" in cause and "stale" in cause and "harness culprit" in cause, cause


# ------------------------------------------------------------------ issue 63, item 2
def budgeted(verdict: str, index: int, calls: int, median_s: float) -> dict[str, Any]:
    """A cell of a `budget: 5s` matrix on the local runtime, run for `calls` calls (its
    `iterations` the default it never read), with the session's cgroup growing."""
    label = "v2" if index else "v1"
    return {
        "schema": 1, "id": f"{label}.cpu.slow", "row": "cpu.slow", "verdict": verdict,
        "reason": "steps slower" if index else "no slowdown", "runtime": "local",
        "image": {"label": label, "index": index, "ref": f"/opt/{label}/bin/python3"},
        "gpu": {"value": "none", "label": "cpu"},
        "scenario": {"id": "slow", "script": "slow.py"},
        "settings": {"iterations": 2000, "warmup": 200, "sample_every": 10,
                     "budget": 5.0, "max_iterations": 1_000_000, "min_iterations": 50},
        "end": {"status": "ok", "iterations": calls, "budget_spent": True},
        "summary": {"iterations": calls, "median_step_s": median_s},
        "memory": {"heap": {"n": calls // 10, "slope": 0.0, "slope_lo": -1.0,
                            "slope_hi": 1.0, "growth": 0.0, "kind": "stable"},
                   "cgroup": {"n": calls // 10, "slope": 190e3, "slope_lo": -480e3,
                              "slope_hi": 700e3, "growth": 190e3 * calls,
                              "kind": "ambiguous"}},
        "steps": {"median_s": median_s, "ratio": 1.0, "p_value": 0.4},
        "fingerprint": {"python": "3.11.7"},
    }


def test_a_budgeted_slowdown_is_drafted_as_it_ran_and_reproduced_by_its_step_time(
        tmp_path: Path) -> None:
    """Issue 63 item 2: a `budget: 5s` run of 110 calls was drafted as "2000 iterations
    after 200 warm-up", its repro.yaml set `iterations: 2000`, and its plain reproduction
    printed max RSS for a slowdown beside the machine's cgroup growth."""
    import yaml

    from harness import matrixfile

    (tmp_path / "slow.py").write_text(LOOP_SCRIPT)
    cells = [budgeted("ok", 0, 744, 0.0015), budgeted("regression", 1, 110, 0.007)]
    report = Report.from_results("slow", as_results({c["id"]: c for c in cells}),
                                 {"matrix": str(tmp_path / "m.yaml")}, tmp_path)
    text = render(report, "cpu.slow")
    scenario = section(text, "Minimal scenario")
    assert "a 5 s time budget (110 calls measured) after 200 warm-up" in scenario, scenario
    assert "2000" not in scenario
    plain = section(text, "Reproduce without harness")
    assert "range(110)" in plain and "perf_counter" in plain and "median step" in plain
    assert "ru_maxrss" not in plain, plain
    # the session's cgroup is not the cell's on the local runtime: no row for it
    assert "cgroup growth" not in section(text, "Measured")
    repro = section(text, "Reproduce with harness")
    doc = yaml.safe_load(repro.split("```yaml\n", 1)[1].split("```", 1)[0])
    assert doc["defaults"] == {"budget": "5s", "warmup": 200, "sample_every": 10}, doc
    (tmp_path / "repro.yaml").write_text(yaml.safe_dump(doc))
    loaded = matrixfile.load(tmp_path / "repro.yaml")
    assert {c.scenario.settings.run_budget for c in loaded.cells} == {5.0}


def test_a_leak_is_reproduced_by_its_memory_for_the_calls_it_ran(report: Report) -> None:
    plain = section(render(report), "Reproduce without harness")
    assert "ru_maxrss" in plain and "perf_counter" not in plain
    assert "range(2000)" in plain and "range(200)" in plain, plain


LOOP_SCRIPT = "def setup(params):\n    return None\n\n\ndef step(state):\n    pass\n"
