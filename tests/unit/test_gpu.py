"""GPU facts at their boundary: image CUDA from real NGC configs, the compatibility
precheck, run-time detection from the first step and the logs, engine GPU mechanisms,
and `harness doctor` against a fake engine and a fake NVML probe."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness import gpu, matrixfile
from harness.analysis.outcomes import runtime_incompatibility
from harness.cli import doctor
from harness.errors import EngineUnavailable
from harness.gpu import Gpu, HostGpus, image_cuda, precheck
from harness.matrixfile.model import abilities
from harness.runtimes.base import Capabilities
from harness.runtimes.dockerdoctor import Engine

# The config of nvcr.io/nvidia/tensorflow:20.12-tf1-py3 and 22.12-tf1-py3 (docker inspect:
# Config.Env and Config.Labels, trimmed).
NGC_20_12_ENV = ["PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/bin",
                 "CUDA_VERSION=11.1.1.017", "CUDA_DRIVER_VERSION=455.32.00",
                 "CUDNN_VERSION=8.0.5.39", "NVIDIA_TENSORFLOW_VERSION=20.12-tf1",
                 "NVIDIA_REQUIRE_CUDA=cuda>=9.0"]
NGC_20_12_LABELS = {"com.nvidia.cuda.version": "11.1.1.017", "com.nvidia.cudnn.version":
                    "8.0.5.39", "com.nvidia.build.id": "17950526"}
NGC_22_12_ENV = ["CUDA_VERSION=11.8.0.065", "CUDNN_VERSION=8.7.0.84",
                 "NVIDIA_TENSORFLOW_VERSION=22.12-tf1"]
NGC_22_12_LABELS = {"com.nvidia.cuda.version": "11.8.0.065"}

RTX_4090 = Gpu(0, "NVIDIA GeForce RTX 4090", "GPU-4090", (8, 9), 24564 << 20)
RTX_3090 = Gpu(0, "NVIDIA GeForce RTX 3090", "GPU-3090", (8, 6), 24576 << 20)
H100 = Gpu(0, "NVIDIA H100 80GB HBM3", "GPU-h100", (9, 0), 81559 << 20)


# ---------------------------------------------------------------- image CUDA
def test_image_cuda_from_ngc_env_labels_and_require() -> None:
    assert image_cuda(NGC_20_12_LABELS, NGC_20_12_ENV) == (11, 1)
    assert image_cuda({}, NGC_22_12_ENV) == (11, 8)
    assert image_cuda(NGC_22_12_LABELS, []) == (11, 8)
    assert image_cuda(None, {"CUDA_VERSION": "12.0.0"}) == (12, 0)
    # nvidia/cuda base images without CUDA_VERSION still say what they require
    assert image_cuda({}, ["NVIDIA_REQUIRE_CUDA=cuda>=11.8 brand=tesla,driver>=470"]) == (11, 8)
    assert image_cuda({"maintainer": "x"}, ["PATH=/bin", "EMPTY="]) is None


# ---------------------------------------------------------------- precheck
@pytest.mark.parametrize(("cuda", "card", "kind"), [
    ((11, 1), RTX_4090, "unsupported"),      # 20.12 on the 4090: CUDA 11.1 predates cc 8.9,
                                             # its sm_86 cubins may run: run it, decide then
    ((11, 8), RTX_4090, None),               # 22.12 on the 4090
    ((11, 1), RTX_3090, None),               # 20.12 on the 3090: sm_86 arrived in 11.1
    ((11, 0), RTX_3090, "unsupported"),      # 20.06 (CUDA 11.0) knew sm_80 only (same major)
    ((10, 2), RTX_3090, "not-applicable"),   # no Ampere binaries at all
    ((11, 7), H100, "not-applicable"),       # Hopper needs 11.8
    ((12, 8), (12, 0), None),                # RTX 50xx from CUDA 12.8
    ((12, 6), (12, 0), "not-applicable"),
    ((13, 0), (7, 0), "not-applicable"),     # CUDA 13 dropped Volta
    ((12, 9), (7, 0), None),
    ((12, 9), (14, 0), "degraded"),          # a GPU newer than the table: PTX JIT at best
    (None, RTX_4090, None),                  # unknown CUDA: decided at run time
    ((11, 1), None, None),
])
def test_precheck(cuda: tuple[int, int] | None, card: Any, kind: str | None) -> None:
    found = precheck(cuda, card)
    assert (found[0] if found else None) == kind, found


def test_precheck_reason_names_versions_and_fix() -> None:
    found = precheck((11, 1), RTX_4090)
    assert found is not None
    assert "CUDA 11.1 predates compute capability 8.9 (Ada)" in found[1]
    assert "supported from CUDA 11.8" in found[1] and "sm_86 binaries may still run" in found[1]
    assert gpu.compatibility((11, 1), (8, 9)) == found[1]


def test_precheck_against_the_driver() -> None:
    major = precheck((12, 2), RTX_4090, driver_cuda=(11, 4))
    assert major is not None and major[0] == "not-applicable"
    assert "driver supports CUDA 11.4" in major[1]
    minor = precheck((12, 4), RTX_4090, driver_cuda=(12, 2))
    assert minor is not None and minor[0] == "degraded" and "PTX JIT" in minor[1]
    assert precheck((11, 8), RTX_4090, driver_cuda=(12, 2)) is None


# ---------------------------------------------------------------- at run time
def test_runtime_logs_decide_first() -> None:
    torch = ("UserWarning: NVIDIA GeForce RTX 4090 with CUDA capability sm_89 is not "
             "compatible with the current PyTorch installation.")
    assert runtime_incompatibility(0.1, 0.001, torch)[0] == "not-applicable"  # type: ignore[index]
    cuda = "RuntimeError: CUDA error: no kernel image is available for execution on the device"
    found = runtime_incompatibility(None, None, cuda)
    assert found == ("not-applicable", "no kernel image for this GPU "
                                       "(cudaErrorNoKernelImageForDevice)")
    ptxas = "ptxas fatal   : Value 'sm_89' is not defined for option 'gpu-name'"
    assert runtime_incompatibility(1.0, 0.001, ptxas)[0] == "not-applicable"  # type: ignore[index]
    tf = ("TensorFlow was not built with CUDA kernel binaries compatible with compute "
          "capability 8.9. CUDA kernels will be jit-compiled from PTX, which could take 30 "
          "minutes or longer.")
    assert runtime_incompatibility(2.0, 0.001, tf) == (
        "degraded", "PTX JIT: TensorFlow has no native kernels for this GPU")


def test_runtime_first_step_timing() -> None:
    # A normal TF1 first session.run (graph build, autotune) is seconds: not JIT.
    assert runtime_incompatibility(3.0, 0.0011, "") is None
    found = runtime_incompatibility(240.0, 0.0011, "")
    assert found is not None and found[0] == "degraded" and "240 s" in found[1]
    # The same image's first step on the 3090 took 1.5 s: 20 s here is JIT.
    assert runtime_incompatibility(20.0, 0.0011, "", baseline_first_s=1.5) is not None
    assert runtime_incompatibility(2.0, 0.0011, "", baseline_first_s=1.5) is None
    assert runtime_incompatibility(None, 0.001, "") is None
    assert runtime_incompatibility(10.0, 0.0, "") is None


# ---------------------------------------------------------------- engine
def test_engine_gpu_mechanisms() -> None:
    assert gpu.engine_gpu_mechanisms({"Runtimes": {"runc": {}}}) == []
    info = {"Runtimes": {"nvidia": {"path": "nvidia-container-runtime"}, "runc": {}},
            "DiscoveredDevices": [{"Source": "cdi", "ID": "nvidia.com/gpu=0"},
                                  {"Source": "cdi", "ID": "nvidia.com/gpu=all"}]}
    assert gpu.engine_gpu_mechanisms(info, hook_found=True) == [
        "nvidia runtime", "CDI (2 nvidia.com/gpu devices)",
        "--gpus (nvidia-container-runtime-hook)"]
    assert gpu.engine_gpu_support(info) == "nvidia runtime"
    assert gpu.engine_gpu_support({"CDISpecDirs": ["/etc/cdi"]}) == "CDI"
    assert gpu.engine_gpu_support({"CDISpecDirs": None}) is None


class FakeNvml:
    """pynvml's surface as gpu.probe uses it."""

    def __init__(self, cards: list[tuple[str, tuple[int, int]]], fail: bool = False):
        self.cards = cards
        self.fail = fail

    def nvmlInit(self) -> None:
        if self.fail:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlShutdown(self) -> None:
        pass

    def nvmlSystemGetDriverVersion(self) -> str:
        return "535.129.03"

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return 12020

    def nvmlDeviceGetCount(self) -> int:
        return len(self.cards)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetCudaComputeCapability(self, h: int) -> tuple[int, int]:
        return self.cards[h][1]

    def nvmlDeviceGetName(self, h: int) -> bytes:
        return self.cards[h][0].encode()

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return f"GPU-{h:08d}"

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        return type("Mem", (), {"total": 24 << 30})()


def test_select_by_index_uuid_and_all() -> None:
    cards = [RTX_3090, Gpu(1, "NVIDIA GeForce RTX 4090", "GPU-4090", (8, 9), None)]
    assert gpu.select("1", cards) == cards[1:]
    assert gpu.select("GPU-3090", cards) == cards[:1]
    assert gpu.select("all", cards) == cards
    assert gpu.select("2", cards) is None


def test_probe_reads_driver_and_gpus() -> None:
    host = gpu.probe(FakeNvml([("NVIDIA GeForce RTX 4090", (8, 9))]))
    assert host.driver == "535.129.03" and host.cuda_driver == (12, 2)
    assert host.gpus == [Gpu(0, "NVIDIA GeForce RTX 4090", "GPU-00000000", (8, 9), 24 << 30)]
    failed = gpu.probe(FakeNvml([], fail=True))
    assert failed.gpus == [] and failed.reason is not None and "Not Found" in failed.reason


# ---------------------------------------------------------------- doctor
class FakeEngine:
    # Declared as a Docker engine whose GPUs no probe container lists: doctor reads this
    # machine's NVML for them, and asks nothing it does not declare.
    capabilities = Capabilities("Docker", abilities("docker"), queues_cells=False,
                                probes_gpus=False, resolves_days=False, builds_hybrids=False)

    def __init__(self, info: Mapping[str, Any], images: Mapping[str, Mapping[str, Any]],
                 registry: frozenset[str] = frozenset()):
        self._info = info
        self.images = images
        self.registry = registry       # refs a pull would find

    def setup_checks(self, wants_gpu: bool) -> list[tuple[str, str, str]]:
        return []

    def gpu_inventory(self, ref: str) -> HostGpus | None:
        raise AssertionError("doctor asked a engine that lists no GPUs for them")

    def engine_info(self) -> Mapping[str, Any]:
        return self._info

    def image_config(self, ref: str) -> Mapping[str, Any] | None:
        return self.images.get(ref)

    def pullable(self, ref: str) -> str | None:
        if ref in self.registry:
            return None
        return (f"image {ref} not found in its registry (no such repository or tag) "
                "(manifest unknown)\n  fix: check the tag exists")


NGC = "nvcr.io/nvidia/tensorflow"
ENGINE_INFO = {"ServerVersion": "28.2.2", "CgroupVersion": "2", "DefaultRuntime": "runc",
               "Runtimes": {"nvidia": {}, "runc": {}}}
IMAGES = {f"{NGC}:20.12-tf1-py3": {"labels": NGC_20_12_LABELS, "env": NGC_20_12_ENV},
          f"{NGC}:22.12-tf1-py3": {"labels": NGC_22_12_LABELS, "env": NGC_22_12_ENV}}


def ngc_matrix(tmp_path: Path, gpus: str = "0", hosts: str = "") -> Any:
    (tmp_path / "rfft.py").write_text("def setup(p):\n    return 0\n\n\ndef step(s):\n    pass\n")
    m = tmp_path / "matrix.yaml"
    m.write_text(f"name: ngc\nruntime: docker\n{hosts}matrix:\n"
                 f"  image: [{NGC}:20.12-tf1-py3, {NGC}:22.12-tf1-py3]\n"
                 f"  gpu: [{gpus}]\n  scenario: [rfft.py]\n")
    return matrixfile.load(m)


def host_with(*cards: Gpu) -> HostGpus:
    return HostGpus(driver="535.129.03", cuda_driver=(12, 2), gpus=list(cards))


def test_doctor_on_the_4090_box_warns_20_12_unsupported(tmp_path: Path) -> None:
    engine = FakeEngine(ENGINE_INFO, IMAGES)
    checks = doctor.diagnose(ngc_matrix(tmp_path), {"local": None}, lambda url: engine,
                             host_with(RTX_4090), has_gpu=True, hook_found=False)
    text = "\n".join(checks.lines)
    assert checks.code == 0, text
    assert "[ok] NVIDIA driver 535.129.03, CUDA 12.2, 1 GPU(s)" in text
    assert "GPU 0: NVIDIA GeForce RTX 4090, compute capability 8.9, 24564 MiB" in text
    assert "GPU support: nvidia runtime" in text
    assert f"[ok] engine local: image {NGC}:20.12-tf1-py3 (CUDA 11.1)" in text
    assert ("[warn] engine local: 20.12-tf1-py3 on GPU 0 (NVIDIA GeForce RTX 4090): "
            "unsupported: CUDA 11.1 predates compute capability 8.9") in text
    assert "22.12-tf1-py3 on GPU 0" not in text


def test_doctor_on_the_3090_box_is_clean(tmp_path: Path) -> None:
    engine = FakeEngine(ENGINE_INFO, IMAGES)
    checks = doctor.diagnose(ngc_matrix(tmp_path), {"local": None}, lambda url: engine,
                             host_with(RTX_3090), has_gpu=True, hook_found=False)
    assert checks.code == 0 and not any("[warn]" in x for x in checks.lines), checks.lines


def test_doctor_fails_with_fixes(tmp_path: Path) -> None:
    engine = FakeEngine({"ServerVersion": "20.10.24", "Runtimes": {"runc": {}}},
                        {f"{NGC}:22.12-tf1-py3": IMAGES[f"{NGC}:22.12-tf1-py3"]})
    checks = doctor.diagnose(ngc_matrix(tmp_path, gpus="0, 1"), {"local": None},
                             lambda url: engine, host_with(RTX_4090), has_gpu=True,
                             hook_found=False)
    text = "\n".join(checks.lines)
    assert checks.code == 3 and checks.failures == 3, text
    assert "[FAIL] engine local: no NVIDIA runtime, CDI devices or --gpus hook" in text
    assert "fix: install nvidia-container-toolkit" in text
    assert "selects GPU 1, which this host does not have (GPUs: 0)" in text
    assert f"[FAIL] engine local: image {NGC}:20.12-tf1-py3 is not on the engine" in text
    assert "fix: check the tag exists" in text      # the engine's own fix, said once


class PodmanLike(FakeEngine):
    """An engine that declares a probe container lists its GPUs, given by CDI name."""

    capabilities = Capabilities("Podman", abilities("podman"), queues_cells=False,
                                probes_gpus=True, resolves_days=False, builds_hybrids=False)

    def setup_checks(self, wants_gpu: bool) -> list[tuple[str, str, str]]:
        return [("ok", "CDI spec lists nvidia.com/gpu", "")] if wants_gpu else []

    def gpu_inventory(self, ref: str) -> HostGpus | None:
        return host_with(RTX_3090)


def test_doctor_asks_what_the_runtime_declares(tmp_path: Path) -> None:
    """Doctor reads the engine's `Capabilities`: its name, its setup checks, the GPUs
    its probe container lists (not this machine's), and CDI instead of a toolkit."""
    checks = doctor.diagnose(ngc_matrix(tmp_path), {"local": None},
                             lambda url: PodmanLike(ENGINE_INFO, IMAGES), HostGpus(),
                             has_gpu=False, hook_found=False)
    text = "\n".join(checks.lines)
    assert checks.code == 0, text
    assert "[ok] engine local: CDI spec lists nvidia.com/gpu" in text
    assert "[ok] engine local: Podman 28.2.2" in text
    assert "GPUs through the engine (probe in 20.12-tf1-py3)" in text
    assert "GPU support: CDI (a probe container was given GPUs)" in text
    assert "this host has none" not in text
    plain = doctor.diagnose(ngc_matrix(tmp_path), {"local": None},
                            lambda url: FakeEngine(ENGINE_INFO, IMAGES), HostGpus(),
                            has_gpu=False, hook_found=False)
    assert "[ok] engine local: Docker 28.2.2" in "\n".join(plain.lines)
    assert plain.code == 3      # no GPUs here, none listed by the engine


def test_doctor_without_gpu_or_engine(tmp_path: Path) -> None:
    def no_engine(url: str | None) -> Engine:
        raise EngineUnavailable("no Docker engine answers at the default socket: refused\n"
                                "  fix: start the engine")

    checks = doctor.diagnose(ngc_matrix(tmp_path), {"local": None}, no_engine,
                             HostGpus(reason="no pynvml"), has_gpu=False, hook_found=False)
    text = "\n".join(checks.lines)
    assert checks.code == 3
    assert "[warn] NVIDIA driver: absent (CPU-only host)" in text
    assert "[FAIL] engine local: no Docker engine answers" in text
    assert "fix: start the engine" in text


def test_doctor_cpu_matrix_on_cpu_host_passes(tmp_path: Path) -> None:
    engine = FakeEngine({"ServerVersion": "20.10.24", "Runtimes": {"runc": {}}}, IMAGES)
    checks = doctor.diagnose(ngc_matrix(tmp_path, gpus="none"), {"local": None},
                             lambda url: engine, HostGpus(), has_gpu=False, hook_found=False)
    assert checks.code == 0, checks.lines


def test_doctor_remote_hosts_warn_instead_of_guessing(tmp_path: Path) -> None:
    engine = FakeEngine({"ServerVersion": "28.2.2", "Runtimes": {"runc": {}}}, IMAGES)
    seen: list[str | None] = []

    def connect(url: str | None) -> Engine:
        seen.append(url)
        return engine

    matrix = ngc_matrix(tmp_path, hosts="hosts: [ssh://lab@gpu-3090, ssh://lab@gpu-4090]\n")
    checks = doctor.diagnose(matrix, {h.label: h.url for h in matrix.hosts}, connect,
                             HostGpus(), has_gpu=False, hook_found=False)
    text = "\n".join(checks.lines)
    assert seen == ["ssh://lab@gpu-3090", "ssh://lab@gpu-4090"]
    assert checks.code == 0, text
    assert "`--gpus` support cannot be seen from here" in text
    assert "remote host's GPUs are not visible from here" in text


def test_doctor_local_runtime_only_checks_gpus(tmp_path: Path) -> None:
    (tmp_path / "s.py").write_text("def setup(p):\n    return 0\n\n\ndef step(s):\n    pass\n")
    m = tmp_path / "m.yaml"
    m.write_text("name: l\nruntime: local\nmatrix:\n  image: [python3]\n  gpu: [0]\n"
                 "  scenario: [s.py]\n")

    def refuse(url: str | None) -> Engine:
        raise AssertionError("a local matrix needs no engine")

    checks = doctor.diagnose(matrixfile.load(m), {"local": None}, refuse, HostGpus(), has_gpu=False,
                             hook_found=False)
    assert checks.code == 3 and "asks for GPUs but this host has none" in checks.lines[1]


def test_doctor_local_checks_what_the_sweep_needs(tmp_path: Path) -> None:
    """Issue 21 point 4: a missing interpreter, a pin that does not resolve and a
    scenario with a syntax error each FAIL with a fix; a good image is [ok]."""
    (tmp_path / "bad.py").write_text("def setup(p):\n    return 0\ndef step(s)\n    pass\n")
    (tmp_path / "good.py").write_text("def setup(p):\n    return 0\n\n\ndef step(s):\n    pass\n")
    m = tmp_path / "m.yaml"
    m.write_text("name: l\nruntime: local\nmatrix:\n  image:\n"
                 "    - {name: nopy, python: python9.9}\n    - {name: here, python: python3}\n"
                 "  scenario: [bad.py, good.py]\n")

    def refuse(url: str | None) -> Engine:
        raise AssertionError("a local matrix needs no engine")

    checks = doctor.diagnose(matrixfile.load(m), {"local": None}, refuse, HostGpus(), has_gpu=False,
                             hook_found=False, out=tmp_path / "out")
    text = "\n".join(checks.lines)
    # the scenario's failure is bad input: exit 2, as the sweep refuses it before any cell
    assert checks.code == 2 and checks.failures == 2 and checks.bad_input == 1, text
    assert "[FAIL] image nopy: interpreter 'python9.9' not found" in text
    assert "[ok] image here: Python 3." in text
    assert "bad.py:3: SyntaxError" in text and "fix: correct the scenario" in text
    assert "[ok] results directory" in text
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro" / "file").write_text("")
    blocked = doctor.diagnose(matrixfile.load(m), {"local": None}, refuse, HostGpus(),
                              has_gpu=False, hook_found=False,
                              out=tmp_path / "ro" / "file" / "sub")
    assert any(ln.startswith("[FAIL] results directory") for ln in blocked.lines)


def test_a_pin_error_is_one_line_without_every_version() -> None:
    from harness.runtimes.local import short_pip_error

    lines = ["ERROR: Could not find a version that satisfies the requirement multidict==99 "
             "(from versions: 1.0, 1.1, 6.4.4, 6.6.4)",
             "ERROR: No matching distribution found for multidict==99"]
    assert short_pip_error(lines) == ("No matching distribution found for multidict==99 "
                                      "(versions: 1.0 .. 6.6.4, 4 in all)")


def test_uvs_reason_wrapped_to_the_terminal_is_said_whole() -> None:
    """Issue 79 item 7: uv wraps its cause to the terminal's width (`COLUMNS`); the
    reason stopped at the first line's end, "...we can conclude that your requirements"."""
    from harness.runtimes.local import short_pip_error

    lines = ["Using Python 3.11.7 environment at: v",
             "error: No solution found when resolving dependencies",
             "  cause: Because there is no version of six==99.0 and you require six==99.0, we",
             "         can conclude that your requirements are unsatisfiable.",
             "hint: Packages were unavailable because the network was disabled."]
    assert short_pip_error(lines) == (
        "Because there is no version of six==99.0 and you require six==99.0, we can "
        "conclude that your requirements are unsatisfiable.")


def test_doctor_tells_a_pullable_image_from_one_no_registry_has(tmp_path: Path) -> None:
    """Issue 21 point 4: for docker, images present *or pullable*: a missing image the
    registry has is what the sweep pulls ([ok]); one it lacks FAILs with the reason."""
    only_22 = {f"{NGC}:22.12-tf1-py3": IMAGES[f"{NGC}:22.12-tf1-py3"]}
    engine = FakeEngine(ENGINE_INFO, only_22, registry=frozenset({f"{NGC}:20.12-tf1-py3"}))
    checks = doctor.diagnose(ngc_matrix(tmp_path), {"local": None}, lambda url: engine,
                             host_with(RTX_3090), has_gpu=True, hook_found=False)
    text = "\n".join(checks.lines)
    assert checks.code == 0, text
    assert (f"[ok] engine local: image {NGC}:20.12-tf1-py3: not on the engine yet, its "
            "registry has it (the sweep pulls it)") in text
    gone = FakeEngine(ENGINE_INFO, only_22)
    checks = doctor.diagnose(ngc_matrix(tmp_path), {"local": None}, lambda url: gone,
                             host_with(RTX_3090), has_gpu=True, hook_found=False)
    text = "\n".join(checks.lines)
    assert checks.code == 3, text
    assert (f"[FAIL] engine local: image {NGC}:20.12-tf1-py3 is not on the engine and not "
            "found in its registry") in text


@pytest.mark.parametrize("reason", [
    "is not on the engine and could not be pulled (boom)",
    "is not on the engine and its registry cannot be reached (dial tcp)",
    ": the registry refused access (login needed?) (denied)"])
def test_doctor_says_a_missing_image_once(tmp_path: Path, reason: str) -> None:
    """Issue 42 item 8: not "is missing and cannot be pulled: is not on the engine and
    could not be pulled"."""
    ref = f"{NGC}:20.12-tf1-py3"
    engine = FakeEngine(ENGINE_INFO, {f"{NGC}:22.12-tf1-py3": IMAGES[f"{NGC}:22.12-tf1-py3"]})
    engine.pullable = lambda r: f"image {r}{'' if reason[0] == ':' else ' '}{reason}\n  fix: x"
    checks = doctor.diagnose(ngc_matrix(tmp_path), {"local": None}, lambda url: engine,
                             host_with(RTX_3090), has_gpu=True, hook_found=False)
    (line,) = [ln for ln in checks.lines if ref in ln and ln.startswith("[FAIL]")]
    said = line.splitlines()[0]
    assert said.count("not on the engine") == 1 and said.count("pulled") <= 1, said
    assert "missing" not in said and said.startswith(f"[FAIL] engine local: image {ref} is "
                                                     "not on the engine"), said


def test_the_registry_question_is_time_boxed_and_said_in_one_line() -> None:
    import threading

    from harness.runtimes.docker import DockerRuntime

    class Hanging:
        def inspect_distribution(self, ref: str) -> None:
            threading.Event().wait(5)

    class NotFound:
        def inspect_distribution(self, ref: str) -> None:
            raise RuntimeError("manifest unknown: manifest unknown")

    rt = DockerRuntime.__new__(DockerRuntime)
    for api, said in ((Hanging(), "its registry cannot be reached"),
                      (NotFound(), "not found in its registry")):
        rt._client = type("C", (), {"api": api})()
        why = rt.pullable("example/x:1", timeout_s=0.2)
        assert why is not None and said in why.splitlines()[0], why
        assert why.splitlines()[-1].startswith("  fix: ")
    rt._client = type("C", (), {"api": type("A", (), {
        "inspect_distribution": lambda self, ref: {}})()})()
    assert rt.pullable("example/x:1") is None
    assert "harness images build" not in str(rt.pullable("harness-test/py:1"))  # no recipe


FAKE_PY = """#!/bin/sh
# An interpreter whose pip cannot find {pin}: prints what pip prints, every version too.
case "$*" in
  *"-m pip install --dry-run"*) {pip} ;;
  *) exec python3 "$@" ;;
esac
"""


def test_doctor_local_pin_that_does_not_resolve_fails_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 21 point 4: an uninstallable pin is a FAIL naming the pin, one line, no
    version list; an index that does not answer in time is a warning, not a FAIL."""
    from harness.runtimes import local

    versions = ", ".join(f"1.{k}" for k in range(40))
    fake = tmp_path / "python-fake"
    fake.write_text(FAKE_PY.format(pin="multidict==9.9", pip=(
        f"echo 'ERROR: Could not find a version that satisfies the requirement "
        f"multidict==9.9 (from versions: {versions})'; echo 'ERROR: No matching "
        f"distribution found for multidict==9.9'; exit 1")))
    fake.chmod(0o755)
    slow = tmp_path / "python-slow"
    slow.write_text(FAKE_PY.format(pin="-", pip="sleep 5"))
    slow.chmod(0o755)
    (tmp_path / "s.py").write_text("def setup(p):\n    return 0\n\n\ndef step(s):\n    pass\n")
    m = tmp_path / "m.yaml"
    m.write_text(f"name: l\nruntime: local\nmatrix:\n  image:\n"
                 f"    - {{name: nine, python: {fake}, pip: [multidict==9.9]}}\n"
                 f"    - {{name: slow, python: {slow}, pip: [never-built-here==1.0]}}\n"
                 f"  scenario: [s.py]\n")
    monkeypatch.setattr(local, "RESOLVE_TIMEOUT_S", 1.0)
    checks = doctor.diagnose(matrixfile.load(m), {"local": None}, lambda url: FakeEngine({}, {}),
                             HostGpus(), has_gpu=False, hook_found=False, out=tmp_path / "out")
    text = "\n".join(checks.lines)
    assert checks.failures == 1 and checks.code == 3, text
    line = next(ln for ln in checks.lines if ln.startswith("[FAIL] image nine"))
    assert ("pins do not resolve: No matching distribution found for multidict==9.9 "
            "(versions: 1.0 .. 1.39, 40 in all)") in line, line
    assert "1.17" not in text and text.count("image nine") == 2     # the pin line and Python
    assert "[warn] image slow: pins not checked: pip found no answer from its index in 1 s" \
        in text


def test_doctor_says_pins_a_sweep_installed_without_asking_the_index(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the sweep's cached venv of an image's pins exists, the doctor says the pins
    are installed, naming the venv, and runs no pip; without that venv it asks pip, as
    before (this fake pip finds nothing: FAIL)."""
    from harness.matrixfile.model import ImageSpec
    from harness.runtimes.local import LocalRuntime, venv_dirs

    fake = tmp_path / "python-fake"
    fake.write_text(FAKE_PY.format(pin="multidict==6.4.4", pip=(
        "echo 'ERROR: No matching distribution found for multidict==6.4.4'; exit 1")))
    fake.chmod(0o755)
    (tmp_path / "s.py").write_text("def setup(p):\n    return 0\n\n\ndef step(s):\n    pass\n")
    m = tmp_path / "m.yaml"
    m.write_text(f"name: l\nruntime: local\nmatrix:\n  image:\n"
                 f"    - {{name: md, python: {fake}, pip: [multidict==6.4.4]}}\n"
                 f"  scenario: [s.py]\n")
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache" / "harness"))
    image = ImageSpec(label="md", ref="md", index=0, python=str(fake), pip=("multidict==6.4.4",))
    _, version = LocalRuntime(tmp_path / "cache" / "harness")._python(image)
    venv, _ = venv_dirs(tmp_path / "cache" / "harness", version, ["multidict==6.4.4"], [])

    def diagnose() -> str:
        checks = doctor.diagnose(matrixfile.load(m), {"local": None},
                                 lambda url: FakeEngine({}, {}), HostGpus(), has_gpu=False,
                                 hook_found=False, out=tmp_path / "out")
        return "\n".join(checks.lines)

    text = diagnose()
    assert "[FAIL] image md: pins do not resolve: No matching distribution" in text, text
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    text = diagnose()
    assert (f"[ok] image md: pins installed (multidict==6.4.4; cached venv {venv})" in text
            and "FAIL" not in text), text
