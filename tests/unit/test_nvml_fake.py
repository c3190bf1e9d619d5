"""NVML at its boundary: the agent's ctypes reader and the host's pynvml sampler against a
fake libnvidia-ml.so.1 built from C (tests/data/fake_nvml/fake_nvml.c) that exports the
real symbol names, signatures and structs, with devices chosen through env variables.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from loadfile import load_file

from harness.gpu.host import NO_PYNVML, HostGpuSampler, reconcile
from tests.pythons import pythons

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "tests" / "data" / "fake_nvml" / "fake_nvml.c"
AGENT_DIR = ROOT / "harness" / "agent"
MiB = 1024 * 1024
TWO_GPUS = "NVIDIA GeForce RTX 4090:8.9:24564MiB:312MiB;NVIDIA GeForce RTX 3090:8.6:24576MiB:1GiB"
PY36 = pythons(6)
FAKE_ENV = ("FAKE_NVML_DEVICES", "FAKE_NVML_DRIVER", "FAKE_NVML_CUDA", "FAKE_NVML_INIT_ERROR",
            "FAKE_NVML_LEAK", "HARNESS_NVML_DEVICES", "FAKE_NVML_ACTIVITY",
            "FAKE_NVML_ACTIVITY_FILE", "FAKE_NVML_ACTIVITY_ERROR")


def _compile(source: Path, out: Path, *defines: str) -> Path:
    gcc = shutil.which("gcc")
    if gcc is None:
        if os.environ.get("CI") == "true":
            pytest.fail("gcc is missing: CI must `apt-get install -y gcc`", pytrace=False)
        pytest.skip("no gcc to build the fake libnvidia-ml.so.1")
    subprocess.run([gcc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror",
                    *(f"-D{d}" for d in defines), "-o", str(out), str(source)], check=True)
    return out


@pytest.fixture(scope="session")
def fake_nvml_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _compile(SOURCE, tmp_path_factory.mktemp("fake_nvml") / "libnvidia-ml.so.1")


@pytest.fixture
def fake_nvml(fake_nvml_build: Path, tmp_path: Path,
              monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh copy per test: dlopen keeps one state per file, and env is read at init."""
    for name in FAKE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FAKE_NVML_PROFILE", str(tmp_path / "no-profile"))
    lib = tmp_path / "lib" / "libnvidia-ml.so.1"
    lib.parent.mkdir()
    shutil.copy(fake_nvml_build, lib)
    yield lib


def agent_nvml() -> ModuleType:
    """The agent's readers module (its `Nvml`), loaded by its path, its folder on sys.path
    for its `import fields`, which is forgotten afterwards."""
    had = "fields" in sys.modules
    module = load_file(AGENT_DIR / "readers.py", "agent_readers", folder_on_path=True)
    if not had:
        sys.modules.pop("fields", None)
    return module


# ---------------------------------------------------------------- agent side (ctypes)
def test_reads_devices_driver_and_memory(fake_nvml: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NVML_DEVICES", TWO_GPUS)
    monkeypatch.setenv("FAKE_NVML_DRIVER", "525.147.05")
    monkeypatch.setenv("FAKE_NVML_CUDA", "12000")
    nv = agent_nvml().Nvml(str(fake_nvml))
    assert nv.available, nv.reason
    devices = nv.devices()
    assert [d["name"] for d in devices] == ["NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 3090"]
    assert [d["cc"] for d in devices] == [[8, 9], [8, 6]]
    assert devices[0]["uuid"] == "GPU-fa4e0000-0000-4000-8000-000000000000"
    assert devices[1]["memory_total"] == 24576 * MiB
    assert nv.driver() == "525.147.05"
    assert nv.cuda_driver() == "12.0"
    assert nv.used_by_device() == [312 * MiB, 1024 * MiB]
    assert nv.used() == 1336 * MiB
    assert nv.summary()["devices"] == devices
    nv.close()
    assert not nv.available and nv.used() is None


def test_used_grows_when_the_gpu_leaks(fake_nvml: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NVML_LEAK", str(MiB))
    nv = agent_nvml().Nvml(str(fake_nvml))
    first, second = nv.used(), nv.used()
    assert first is not None and second is not None and second - first == MiB


def write_profile(tmp_path: Path) -> Path:
    """Two simulated RTX 3090s as the fake hook writes them (reserved 333 MiB each)."""
    state = tmp_path / "state"
    state.mkdir()
    profile = tmp_path / "profile"
    profile.write_text(
        f"driver 525.147.05\ncuda 12000\nstate {state}\n"
        f"gpu GPU-aaaa-0 8.6 {24576 * MiB} {333 * MiB} {2 * MiB} NVIDIA GeForce RTX 3090\n"
        f"gpu GPU-aaaa-1 8.6 {24576 * MiB} {333 * MiB} {2 * MiB} NVIDIA GeForce RTX 3090\n")
    return profile


def test_profile_v2_reports_reserved_apart(fake_nvml: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NVML_PROFILE", str(write_profile(tmp_path)))
    nv = agent_nvml().Nvml(str(fake_nvml))
    assert nv.available and nv.memory_api == "v2"
    summary = nv.summary()
    assert summary["driver"] == "525.147.05" and summary["cuda_driver"] == "12.0"
    d0 = summary["devices"][0]
    assert (d0["name"], d0["uuid"], d0["cc"]) == ("NVIDIA GeForce RTX 3090", "GPU-aaaa-0", [8, 6])
    assert d0["memory_reserved"] == 333 * MiB and d0["memory_used"] == 2 * MiB
    assert nv.used() == 4 * MiB  # two idle GPUs: the reservation is not "used"
    # v1 as current drivers answer it: the reservation counts as used
    v1 = agent_nvml().Nvml(str(fake_nvml))
    v1._fn.pop("nvmlDeviceGetMemoryInfo_v2")
    assert v1.memory(0) == (24576 * MiB, 335 * MiB)


def test_profile_counter_file_drives_used(fake_nvml: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NVML_PROFILE", str(write_profile(tmp_path)))
    nv = agent_nvml().Nvml(str(fake_nvml))
    before = nv.used_by_device()
    (tmp_path / "state" / "GPU-aaaa-1.used").write_text(str(512 * MiB))
    after = nv.used_by_device()
    assert after[0] == before[0] and after[1] - before[1] == 512 * MiB


def test_restricted_to_the_cells_gpus(fake_nvml: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NVML_PROFILE", str(write_profile(tmp_path)))
    monkeypatch.setenv("HARNESS_NVML_DEVICES", "GPU-aaaa-1")
    nv = agent_nvml().Nvml(str(fake_nvml))
    assert [d["index"] for d in nv.devices()] == [1]
    (tmp_path / "state" / "GPU-aaaa-0.used").write_text(str(900 * MiB))  # another job
    assert nv.used() == 2 * MiB
    monkeypatch.setenv("HARNESS_NVML_DEVICES", "0")
    assert [d["uuid"] for d in agent_nvml().Nvml(str(fake_nvml)).devices()] == ["GPU-aaaa-0"]


def test_activity_reads_utilization_clock_and_reasons(fake_nvml: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    nv = agent_nvml().Nvml(str(fake_nvml))
    # an idle GPU answers as an idle H100 did: 0 %, 375 MHz, 0x1 (GPU idle)
    assert nv.activity() == {"gpu_util": 0, "sm_mhz": 375, "clk_reasons": 1}
    monkeypatch.setenv("FAKE_NVML_ACTIVITY", "100:1410:0x4")
    assert nv.activity() == {"gpu_util": 100, "sm_mhz": 1410, "clk_reasons": 4}
    state = tmp_path / "activity"
    monkeypatch.setenv("FAKE_NVML_ACTIVITY_FILE", str(state))
    state.write_text("97:1980:0x0\n")
    assert nv.activity() == {"gpu_util": 97, "sm_mhz": 1980, "clk_reasons": 0}
    # two devices: the busier one's utilization, the lower clock, every reason
    monkeypatch.setenv("FAKE_NVML_DEVICES", TWO_GPUS)
    (tmp_path / "two").mkdir()
    lib = shutil.copy(fake_nvml, tmp_path / "two" / "libnvidia-ml.so.1")
    two = agent_nvml().Nvml(str(lib))
    assert len(two.handles) == 2 and two.activity()["gpu_util"] == 97


def test_activity_skips_what_the_driver_lacks(fake_nvml_build: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    for name in FAKE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FAKE_NVML_PROFILE", str(tmp_path / "no-profile"))
    monkeypatch.setenv("FAKE_NVML_ACTIVITY", "88:1500:0x40")
    # a library without the three functions: no keys, memory still read
    (tmp_path / "old").mkdir()
    old = _compile(SOURCE, tmp_path / "old" / "libnvidia-ml.so.1", "FAKE_NVML_NO_ACTIVITY")
    nv = agent_nvml().Nvml(str(old))
    assert nv.available and nv.activity() == {} and nv.used() is not None
    # a driver before R535: the reasons under their older name
    (tmp_path / "r530").mkdir()
    r530 = _compile(SOURCE, tmp_path / "r530" / "libnvidia-ml.so.1", "FAKE_NVML_THROTTLE_ONLY")
    nv = agent_nvml().Nvml(str(r530))
    assert "nvmlDeviceGetCurrentClocksEventReasons" not in nv._fn
    assert nv.activity() == {"gpu_util": 88, "sm_mhz": 1500, "clk_reasons": 0x40}
    # a GPU that answers NOT_SUPPORTED: skipped, and not asked again
    monkeypatch.setenv("FAKE_NVML_ACTIVITY_ERROR", "3")
    lib = tmp_path / "ns" / "libnvidia-ml.so.1"
    lib.parent.mkdir()
    shutil.copy(fake_nvml_build, lib)
    nv = agent_nvml().Nvml(str(lib))
    assert nv.activity() == {} and "nvmlDeviceGetUtilizationRates" not in nv._fn
    monkeypatch.delenv("FAKE_NVML_ACTIVITY_ERROR")
    assert nv.activity() == {}


def test_missing_library_says_why() -> None:
    nv = agent_nvml().Nvml("/nonexistent/libnvidia-ml.so.1")
    assert not nv.available
    assert "cannot load /nonexistent/libnvidia-ml.so.1" in nv.reason
    assert nv.devices() == [] and nv.used() is None and nv.driver() is None


def test_init_failure_names_nvml_error(fake_nvml: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NVML_INIT_ERROR", "9")  # NVML_ERROR_DRIVER_NOT_LOADED
    nv = agent_nvml().Nvml(str(fake_nvml))
    assert not nv.available
    assert nv.reason == "nvmlInit_v2 failed: Driver Not Loaded (9)"


def test_missing_symbol_is_a_reason_not_a_crash(tmp_path: Path) -> None:
    src = tmp_path / "partial.c"
    src.write_text("int nvmlInit_v2(void) { return 0; }\n")
    lib = _compile(src, tmp_path / "libnvidia-ml.so.1")
    nv = agent_nvml().Nvml(str(lib))
    assert not nv.available and "NVML symbol missing" in nv.reason


def test_probe_prints_summary(fake_nvml: Path) -> None:
    out = subprocess.run([sys.executable, str(AGENT_DIR / "readers.py"), str(fake_nvml)],
                         capture_output=True, text=True, check=True,
                         env={**os.environ, "FAKE_NVML_DRIVER": "550.54.14"}).stdout
    probe = json.loads(out)
    assert probe["driver"] == "550.54.14" and probe["cuda_driver"] == "12.2"
    assert probe["devices"][0]["cc"] == [8, 9]


SCENARIO = """
def setup(params):
    return None


def step(state):
    pass
"""


@pytest.mark.parametrize("python", [sys.executable, *PY36[-1:]],
                         ids=lambda p: "current" if p == sys.executable else "py3.6")
def test_agent_reports_gpu_header_and_used(fake_nvml: Path, tmp_path: Path, python: str) -> None:
    scenario = tmp_path / "noop.py"
    scenario.write_text(SCENARIO)
    out = tmp_path / "samples.jsonl"
    env = {**os.environ, "HARNESS_NVML_LIB": str(fake_nvml), "FAKE_NVML_LEAK": str(MiB),
           "FAKE_NVML_DEVICES": "NVIDIA GeForce RTX 4090:8.9:24564MiB:312MiB"}
    subprocess.run([python, str(AGENT_DIR / "agent.py"), "--scenario", str(scenario),
                    "--iterations", "100", "--warmup", "0", "--sample-every", "10",
                    "--sample-interval", "30", "--out", str(out), "--quiet"],
                   env=env, check=True, timeout=60)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    gpu = records[0]["gpu"]
    assert gpu["driver"] == "535.129.03"
    (device,) = gpu["devices"]
    assert device["name"] == "NVIDIA GeForce RTX 4090" and device["cc"] == [8, 9]
    assert device["uuid"].startswith("GPU-") and device["memory_total"] == 24564 * MiB
    used = [r["gpu_used"] for r in records if r["type"] == "sample" and r["src"] == "step"]
    assert len(used) == 11 and used == sorted(used) and used[-1] > used[0]
    assert records[-1]["status"] == "ok"


BUSY_LATER = """
import os


def setup(params):
    return {"k": 0}


def step(state):
    state["k"] += 1
    if state["k"] == 50:
        with open(os.environ["FAKE_NVML_ACTIVITY_FILE"], "w") as f:
            f.write("100:1410:0x4")
"""


@pytest.mark.parametrize("python", [sys.executable, *PY36[-1:]],
                         ids=lambda p: "current" if p == sys.executable else "py3.6")
def test_agent_samples_gpu_activity_and_the_host_reads_it(fake_nvml: Path, tmp_path: Path,
                                                         python: str) -> None:
    from harness.protocol.ingest import read_samples

    # GIVEN a scenario that makes the (fake) GPU busy and power-capped half-way
    scenario = tmp_path / "busy.py"
    scenario.write_text(BUSY_LATER)
    activity = tmp_path / "activity"
    activity.write_text("3:1980:0x0")
    out = tmp_path / "samples.jsonl"
    env = {**os.environ, "HARNESS_NVML_LIB": str(fake_nvml),
           "FAKE_NVML_ACTIVITY_FILE": str(activity)}
    subprocess.run([python, str(AGENT_DIR / "agent.py"), "--scenario", str(scenario),
                    "--iterations", "100", "--warmup", "0", "--sample-every", "10",
                    "--max-overhead", "0", "--sample-interval", "30", "--out", str(out),
                    "--quiet"], env=env, check=True, timeout=60)
    series = read_samples(out)
    assert not series.problems
    cols = series.cols.gpu
    assert cols is not None
    assert list(cols["gpu_util"]) == [3.0] * 4 + [100.0] * 6
    assert list(cols["sm_mhz"]) == [1980.0] * 4 + [1410.0] * 6
    assert list(cols["clk_reasons"]) == [0.0] * 4 + [4.0] * 6


def test_agent_without_nvml_records_reason(tmp_path: Path) -> None:
    scenario = tmp_path / "noop.py"
    scenario.write_text(SCENARIO)
    out = tmp_path / "samples.jsonl"
    env = {**os.environ, "HARNESS_NVML_LIB": str(tmp_path / "missing.so")}
    subprocess.run([sys.executable, str(AGENT_DIR / "agent.py"), "--scenario", str(scenario),
                    "--iterations", "10", "--warmup", "0", "--out", str(out), "--quiet"],
                   env=env, check=True, timeout=60)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records[0]["gpu"] is None and "cannot load" in records[0]["gpu_reason"]
    assert not any("gpu_used" in r for r in records)


# ---------------------------------------------------------------- host side (pynvml)
HOST_PROBE = """
import json, time
from harness import gpu
from harness.gpu.host import HostGpuSampler
sampler = HostGpuSampler({sel!r}, interval=0.02).start()
time.sleep(0.2)
samples = sampler.stop()
print(json.dumps({{"samples": samples, "reason": sampler.reason,
                  "gpus": [g.__dict__ for g in gpu.list_gpus()]}}))
"""


def test_host_sampler_through_pynvml_and_the_fake(fake_nvml: Path) -> None:
    """pynvml dlopens "libnvidia-ml.so.1" by name: LD_LIBRARY_PATH in a child finds the fake."""
    pytest.importorskip("pynvml", reason="nvidia-ml-py not installed (the `gpu` extra)")
    env = {**os.environ, "LD_LIBRARY_PATH": str(fake_nvml.parent), "FAKE_NVML_LEAK": str(MiB),
           "FAKE_NVML_DEVICES": TWO_GPUS, "PYTHONPATH": str(ROOT)}
    uuid1 = "GPU-fa4e0000-0000-4000-8000-000000000001"
    for sel, index in (("1", 1), (uuid1, 1), ("all", None)):
        out = subprocess.run([sys.executable, "-c", textwrap.dedent(HOST_PROBE.format(sel=sel))],
                             env=env, capture_output=True, text=True, check=True, timeout=60)
        data = json.loads(out.stdout)
        samples = data["samples"]
        assert data["reason"] is None and len(samples) >= 3
        if index is None:
            assert {s["gpu"] for s in samples} == {0, 1}
            continue
        assert {(s["gpu"], s["uuid"]) for s in samples} == {(1, uuid1)}
        used = [s["used"] for s in samples]
        assert used[0] == 1024 * MiB + MiB and used == sorted(used) and used[-1] > used[0]
        assert samples[0]["total"] == 24576 * MiB
    gpus = data["gpus"]
    assert [(g["name"], tuple(g["cc"])) for g in gpus] == [
        ("NVIDIA GeForce RTX 4090", (8, 9)), ("NVIDIA GeForce RTX 3090", (8, 6))]


def test_host_sampler_without_pynvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    sampler = HostGpuSampler("0").start()
    assert sampler.stop() == [] and sampler.reason == NO_PYNVML


def test_host_sampler_for_cpu_cell_does_nothing() -> None:
    sampler = HostGpuSampler("none").start()
    assert sampler.stop() == [] and sampler.reason == "CPU-only cell"


class StubNvml:
    """pynvml's surface as HostGpuSampler uses it, failing at init when asked."""

    def __init__(self, fail: bool = False):
        self.fail = fail
        self.used = 500 * MiB
        self.shutdown = False

    def nvmlInit(self) -> None:
        if self.fail:
            raise RuntimeError("Driver Not Loaded")

    def nvmlShutdown(self) -> None:
        self.shutdown = True

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetIndex(self, h: int) -> int:
        return h

    def nvmlDeviceGetUUID(self, h: int) -> bytes:
        return f"GPU-{h}".encode()

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        self.used += MiB
        return type("Mem", (), {"used": self.used, "total": 24 << 30})()


def test_host_sampler_with_stub_and_failing_init() -> None:
    stub = StubNvml()
    samples = HostGpuSampler("0", interval=0.01, nvml=stub).start().stop()
    assert samples[0]["uuid"] == "GPU-0" and samples[-1]["used"] > samples[0]["used"]
    assert stub.shutdown
    failing = HostGpuSampler("0", nvml=StubNvml(fail=True)).start()
    assert failing.stop() == [] and failing.reason is not None
    assert "Driver Not Loaded" in failing.reason


# ---------------------------------------------------------------- reconciling sources
def agent_rows(gpu: list[int], rss: int = 400 * MiB, cgroup: int = 500 * MiB,
               rss_anon: int | None = None) -> list[dict[str, Any]]:
    anon = rss if rss_anon is None else rss_anon
    return [{"type": "sample", "rss": rss, "rss_anon": anon, "cgroup": cgroup, "gpu_used": g}
            for g in gpu]


def test_reconcile_agreeing_sources_raise_no_flag() -> None:
    host_gpu = [{"t": t, "gpu": 0, "used": u} for t, u in
                ((0.0, 10 * MiB), (0.5, 2000 * MiB), (1.0, 3000 * MiB))]
    got = reconcile(agent_rows([1500 * MiB, 3010 * MiB]), [{"usage": 505 * MiB}], host_gpu)
    assert got["flags"] == []
    assert got["sources"]["gpu_host"]["peak"] == 3000 * MiB
    assert got["sources"]["gpu_agent"]["peak"] == 3010 * MiB


def test_reconcile_flags_disagreement_and_shared_gpu() -> None:
    host_gpu = [{"t": 0.0, "gpu": 0, "used": 900 * MiB}, {"t": 1.0, "gpu": 0, "used": 2000 * MiB}]
    got = reconcile(agent_rows([4000 * MiB], rss=900 * MiB), [{"usage": 2000 * MiB}], host_gpu)
    text = "\n".join(got["flags"])
    assert "agent NVML peak 4000 MiB vs host NVML peak 2000 MiB" in text
    assert "already held 900 MiB before the cell started" in text
    assert "agent read peak 500 MiB, engine stats peak 2000 MiB" in text
    assert "anonymous RSS peak 900 MiB exceeds the cgroup's 500 MiB" in text


def test_reconcile_compares_anonymous_rss_with_the_cgroup() -> None:
    # 600 MiB of TF's shared libraries were charged to the container that read them
    # first: RSS exceeds this container's cgroup, its anonymous part does not.
    got = reconcile(agent_rows([0], rss=900 * MiB, rss_anon=300 * MiB), [], [])
    assert not any("different cgroups" in f for f in got["flags"]), got["flags"]
    assert got["sources"]["rss_anon"]["peak"] == 300 * MiB
