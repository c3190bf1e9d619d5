"""The PyTorch and JAX controls on a real GPU (issue 20 items 3 and 6), through a local
sweep: seed 000's rfft loop is `ok` on the device with the framework's allocator bytes
recorded, a 1 MiB/call device leak is a `leak` the allocator shows, a spin-waiting GPU
slowdown carries the device's busy time and clock (NVML) and is GPU-bound, not CPU-bound.

Marked `gpu`: skipped without an NVIDIA GPU (tests/conftest.py). The interpreter running
the tests is the cells' interpreter (`python:` in the matrix), so torch (and jax, for the
JAX cells) must be importable by it; a missing framework skips its cells' tests.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.result.model import CellResult, load_result
from tests.resultkit import held_ok

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"
MiB = 1024 * 1024
HAVE = {name: importlib.util.find_spec(name) is not None for name in ("torch", "jax")}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CellResult]:
    if not HAVE["torch"]:
        pytest.skip("torch is not importable by this interpreter")
    tmp = tmp_path_factory.mktemp("gpu-frameworks")
    cells = [f"{SCENARIOS / 'torch_rfft.py'}",
             f"{{script: {SCENARIOS / 'torch_rfft.py'}, id: torch_const, "
             "params: {input: constant}}",
             f"{SCENARIOS / 'gpu_leak.py'}",
             f"{{script: {SCENARIOS / 'gpu_slowdown.py'}, iterations: 800}}"]
    if HAVE["jax"]:
        cells += [f"{SCENARIOS / 'jax_rfft.py'}", f"{SCENARIOS / 'jax_leak.py'}"]
    matrix = tmp / "matrix.yaml"
    matrix.write_text(
        "name: gpu-frameworks\nruntime: local\n"
        "defaults: {iterations: 600, warmup: 50, sample_every: 10, timeout: 10m}\n"
        f"matrix:\n  image:\n    - {{name: fw, python: {sys.executable}}}\n"
        "  gpu: [0]\n  scenario:\n" + "".join(f"    - {c}\n" for c in cells))
    code = main(["sweep", str(matrix), "--out", str(tmp / "reports"), "-q"])
    assert code in (0, 1), f"harness sweep exited {code}"
    out = {}
    for path in (tmp / "reports").glob("*/*/cells/*/result.json"):
        res = load_result(json.loads(path.read_text()), str(path))
        out[res.scenario.id] = res
    return out


def info(res: CellResult) -> dict[str, object]:
    return dict(res.end.info or {})


@pytest.mark.parametrize("cell", ["torch_rfft", "torch_const"])
def test_torch_rfft_control_is_ok_on_the_device(results: dict[str, CellResult],
                                                cell: str) -> None:
    res = results[cell]
    assert held_ok(res), res.reason
    assert str(info(res)["device"]).startswith("cuda")
    assert "fw" in res.memory and res.memory["fw"].kind != "leak"


def test_torch_device_leak_is_a_leak_in_the_allocator(results: dict[str, CellResult]) -> None:
    res = results["gpu_leak"]
    assert res.verdict == "leak", res.reason
    fw = res.memory["fw"]
    assert fw.kind == "leak" and fw.slope == pytest.approx(MiB, rel=0.05)


def test_spinning_gpu_slowdown_is_gpu_bound_with_nvml_evidence(
        results: dict[str, CellResult]) -> None:
    res = results["gpu_slowdown"]
    assert res.verdict == "slowdown", res.reason
    g = res.gpu_time
    assert g is not None and g.late_busy_s is not None, "NVML gave no utilization"
    assert g.bound and g.early_sm_mhz is not None
    assert "GPU-bound" in res.reason and "CPU-bound" not in res.reason


@pytest.mark.skipif(not HAVE["jax"], reason="jax is not importable by this interpreter")
def test_jax_controls(results: dict[str, CellResult]) -> None:
    rfft = results["jax_rfft"]
    assert held_ok(rfft), rfft.reason
    assert str(info(rfft)["device"]).startswith("cuda")
    leak = results["jax_leak"]
    assert leak.memory["fw"].kind == "leak"
    assert leak.memory["fw"].slope == pytest.approx(MiB, rel=0.05)
