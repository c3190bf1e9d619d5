"""PyTorch's CUDA allocator history ("device") and torch.profiler ("ops") on a real GPU.

A scenario that keeps one 1 MiB CUDA tensor per call at a known line: "device" must name
that line with ~1 MiB per call. A scenario whose matmul grows with the call count: the
profiler's late window must show the matmul's time grown. Marked `gpu`; skipped where
torch is not importable by the interpreter running the tests.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
DRIVER = Path(__file__).resolve().parents[1] / "agent" / "attribution_driver.py"
MiB = 1024 * 1024

LEAK = """
import torch


def setup(params):
    return {"keep": []}


def step(state):
    state["keep"].append(torch.empty(262144, device="cuda"))  # LEAK LINE
    torch.ones(1000, device="cuda").sum().item()
"""

GROWING_MATMUL = """
import torch


def setup(params):
    return {"n": 0}


def step(state):
    state["n"] += 1
    size = 64 * (1 + state["n"] // 4)
    a = torch.ones(size, size, device="cuda")
    (a @ a).sum().item()  # MATMUL LINE
"""


def _drive(tmp: Path, source: str, kinds: str, count: int) -> dict:  # type: ignore[type-arg]
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not importable by this interpreter")
    (tmp / "scenario.py").write_text(textwrap.dedent(source))
    out = subprocess.run([sys.executable, str(DRIVER), str(tmp / "scenario.py"), kinds,
                          str(count), "5", "5"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_device_names_the_line_keeping_cuda_tensors(tmp_path: Path) -> None:
    calls = 200
    rec = _drive(tmp_path, LEAK, "device,heap", calls)
    assert "device" not in rec.get("errors", {}), rec.get("errors")
    dev = rec["device"]
    line = next(i for i, t in enumerate(LEAK.splitlines(), 1) if "LEAK LINE" in t)
    top = dev["sites"][0]
    assert [str(tmp_path / "scenario.py"), line, "step"] in [f[:3] for f in top["frames"]]
    assert 0.99 * MiB <= top["size"] / calls <= 1.01 * MiB and top["count"] == calls
    assert dev["total"] >= top["size"]


def test_torch_profiler_shows_the_matmul_grown(tmp_path: Path) -> None:
    rec = _drive(tmp_path, GROWING_MATMUL, "ops", 400)
    assert "ops" not in rec.get("errors", {}), rec.get("errors")
    ops = rec["ops"]
    assert ops["source"] == "torch-profiler"
    assert ops["windows"]["early"]["calls"] >= 50 and ops["windows"]["late"]["calls"] >= 1
    mm = [o for o in ops["ops"] if o["name"] in ("aten::mm", "aten::matmul")]
    assert mm, [o["name"] for o in ops["ops"]]
    cuda = [o for o in ops["ops"] if (o.get("late_cuda_us") or 0) > 0]
    grown = max(cuda, key=lambda o: o["late_cuda_us"] - (o["early_cuda_us"] or 0))
    assert "gemm" in grown["name"].lower() or "mm" in grown["name"].lower(), grown
