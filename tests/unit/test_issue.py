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
