"""scenarios/torch_rfft.py and scenarios/jax_rfft.py, the PyTorch and JAX controls: their
params are checked before the framework is imported, fw_bytes() reads the framework's
allocator (stand-ins for a GPU this machine may not have), and, where the framework is
installed, the agent runs them on the CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
from loadfile import load_file

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"
AGENT = ROOT / "harness" / "agent" / "agent.py"


def load(name: str) -> ModuleType:
    return load_file(SCENARIOS / f"{name}.py", f"scenario_{name}", folder_on_path=True)


@pytest.mark.parametrize(("name", "params", "words"), [
    ("torch_rfft", {"input": "zeros"}, "param 'input' got 'zeros'; allowed values: "
                                       "random | variable | constant"),
    ("torch_rfft", {"plan_cache": -1}, "param 'plan_cache' got -1"),
    ("torch_rfft", {"lenghts": "new"}, "unknown param(s) 'lenghts'"),
    ("jax_rfft", {"device": "cuda"}, "param 'device' got 'cuda'; allowed values: "
                                     "auto | cpu | gpu"),
])
def test_bad_params_name_the_param_and_the_allowed_values(name: str, params: dict[str, object],
                                                          words: str) -> None:
    with pytest.raises(ValueError, match="^" + name) as info:
        load(name).setup(params)
    assert words in str(info.value)


def test_torch_fw_bytes_is_the_caching_allocator_on_cuda_only() -> None:
    mod = load("torch_rfft")
    torch = SimpleNamespace(cuda=SimpleNamespace(memory_allocated=lambda dev: 3 << 20))
    assert mod.fw_bytes({"cuda": True, "torch": torch, "dev": "cuda:0"}) == 3 << 20
    assert mod.fw_bytes({"cuda": False, "torch": torch, "dev": "cpu"}) is None


def test_jax_fw_bytes_is_bytes_in_use_where_the_backend_counts() -> None:
    mod = load("jax_rfft")
    gpu = SimpleNamespace(memory_stats=lambda: {"bytes_in_use": 5 << 20})
    state: dict[str, object] = {"dev": gpu, "fw_api": None}
    assert mod.fw_bytes(state) == 5 << 20 and state["fw_api"] == "memory_stats"
    assert mod.fw_bytes({"dev": SimpleNamespace(memory_stats=lambda: None)}) is None
    assert mod.fw_bytes({"dev": SimpleNamespace()}) is None


@pytest.mark.parametrize(("name", "framework", "device"), [
    ("torch_rfft", "torch", "cpu"), ("jax_rfft", "jax", "cpu:0")])
@pytest.mark.parametrize("params", [{}, {"input": "variable"}, {"input": "constant"},
                                    {"lengths": "new"}])
def test_runs_on_the_cpu_under_the_agent(tmp_path: Path, name: str, framework: str,
                                         device: str, params: dict[str, str]) -> None:
    pytest.importorskip(framework, reason=f"{framework} is not installed here")
    out = tmp_path / "samples.jsonl"
    subprocess.run([sys.executable, str(AGENT), "--scenario", str(SCENARIOS / f"{name}.py"),
                    "--params", json.dumps({**params, "device": "cpu"}), "--iterations", "30",
                    "--warmup", "3", "--out", str(out), "--quiet", "--no-gpu"],
                   check=True, timeout=300)
    end = json.loads(out.read_text().splitlines()[-1])
    assert end["status"] == "ok" and end["iterations"] == 30, end.get("error")
    assert end["info"]["device"] == device and end["info"]["steps"] == 33
    want = 512 + 2 * 33 if params.get("lengths") == "new" else 512
    assert end["info"]["spec_shape"] == [144, want // 2 + 1]
