"""Host-side GPU facts, kept in one module: is there a driver, which GPUs, which compute
capability, which GPU mechanism the engine offers, and whether an image's CUDA can run
on a GPU (decided up front, or from the first iteration and the logs afterwards).

NVML on the host comes from `nvidia-ml-py` (`pynvml`) when installed; without it the
driver's /proc files still say whether GPUs exist. The compatibility rules follow
NVIDIA's documents, cited where each table is.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Version = tuple[int, int]

# First CUDA toolkit whose nvcc targets each compute capability natively (sm_XY), from
# the CUDA Toolkit release notes and NVIDIA's per-architecture compatibility guides:
# Volta sm_70 in CUDA 9.0; Turing sm_75 in 10.0; Ampere sm_80 (A100) in 11.0, sm_86
# (RTX 30xx) in 11.1, sm_87 (Orin) in 11.4; Ada sm_89 (RTX 40xx) and Hopper sm_90 both
# in 11.8 (the Ada and Hopper guides treat "11.7 or earlier" as pre-support); Blackwell
# sm_100 / sm_101 / sm_120 (RTX 50xx) in 12.8, sm_103 and sm_121 in 12.9.
MIN_CUDA_FOR_CC: dict[Version, Version] = {
    (6, 0): (8, 0), (6, 1): (8, 0), (7, 0): (9, 0), (7, 5): (10, 0), (8, 0): (11, 0),
    (8, 6): (11, 1), (8, 7): (11, 4), (8, 9): (11, 8), (9, 0): (11, 8), (10, 0): (12, 8),
    (10, 1): (12, 8), (10, 3): (12, 9), (12, 0): (12, 8), (12, 1): (12, 9),
}
# First CUDA toolkit that no longer targets a compute capability: CUDA 11.0 removed
# sm_30 (Kepler), 12.0 removed sm_35/sm_37, and 13.0 removed offline compilation for
# Maxwell, Pascal and Volta (sm_50 ... sm_72).
DROPPED_IN: list[tuple[Version, Version, Version]] = [  # (cc from, cc to, CUDA)
    ((3, 0), (3, 2), (11, 0)), ((3, 5), (3, 7), (12, 0)), ((5, 0), (7, 2), (13, 0)),
]
ARCH = {5: "Maxwell", 6: "Pascal", 7: "Volta", 8: "Ampere", 9: "Hopper", 10: "Blackwell",
        11: "Blackwell", 12: "Blackwell"}
ARCH_EXCEPTIONS = {(7, 5): "Turing", (8, 9): "Ada"}  # same major, another architecture
# The framework's first step JIT-compiling every kernel from PTX takes minutes, not the
# seconds of graph building and autotuning a normal first step costs.
JIT_MIN_FIRST_S = 30.0
JIT_MIN_RATIO = 100.0

SignKind = Literal["not-applicable", "degraded"]


@dataclass(frozen=True, slots=True)
class LogSign:
    """A text CUDA or a framework prints when an image cannot use the GPU (or only
    through PTX JIT): what it means, and the pattern each of the two log readings uses.

    - `after_run`: `runtime_incompatibility`, after every run, searches the log and the
      traceback for this case-sensitive pattern, in table order; the first sign found
      gives (`kind`, `why`).
    - `in_run`: the within-run reading of how a run ended (`analysis.verdict`) searches
      for these, case-insensitively, as one pattern (`NOT_APPLICABLE_TEXT`); a run whose
      log has one is `not-applicable`, not a crash, and the text found is its reason.
      The texts are shorter there (the reason quotes what was found), and some signs are
      read only one way: a sign with no pattern for a reading is not read by it.
    """

    kind: SignKind
    why: str
    after_run: str | None = None
    in_run: str | None = None


# The one table of what CUDA runtimes and frameworks print when an image cannot use the
# GPU; not-applicable signs first (`runtime_incompatibility` takes the first one found).
LOG_SIGNS: tuple[LogSign, ...] = (
    LogSign("not-applicable", "no kernel image for this GPU (cudaErrorNoKernelImageForDevice)",
            r"no kernel image is available for execution on the device",
            r"no kernel image is available for execution|cudaErrorNoKernelImageForDevice"),
    LogSign("not-applicable", "no binary for this GPU (CUDA_ERROR_NO_BINARY_FOR_GPU)",
            r"CUDA_ERROR_NO_BINARY_FOR_GPU", r"CUDA_ERROR_NO_BINARY_FOR_GPU"),
    LogSign("not-applicable",
            "the driver is older than the image's CUDA runtime (cudaErrorInsufficientDriver)",
            r"CUDA driver version is insufficient for CUDA runtime version",
            r"CUDA driver version is insufficient"),
    LogSign("not-applicable",
            "CUDA forward compatibility is not supported on this GPU (error 804)",
            r"forward compatibility was attempted on non supported HW"),
    LogSign("not-applicable", "the image's ptxas does not know this GPU",
            r"Value 'sm_\d+' is not defined for option 'gpu-name'"),
    LogSign("not-applicable", "PyTorch in the image was not built for this GPU",
            r"with CUDA capability sm_\d+ is not compatible with the current PyTorch"),
    LogSign("not-applicable", "cuBLAS in the image does not support this GPU",
            r"CUBLAS_STATUS_ARCH_MISMATCH"),
    LogSign("not-applicable",
            "the display driver and the CUDA driver do not match (error 803)",
            in_run=r"unsupported display driver / cuda driver combination"),
    LogSign("not-applicable", "the framework needs a GPU of a higher compute capability",
            in_run=r"requires CUDA compute capability"),
    LogSign("degraded", "PTX JIT: TensorFlow has no native kernels for this GPU",
            r"CUDA kernels will be jit-compiled from PTX"),
    LogSign("degraded", "PTX newer than the driver: kernels that need JIT fail",
            r"CUDA_ERROR_UNSUPPORTED_PTX_VERSION|PTX was compiled with an unsupported toolchain"),
)
# The within-run reading's signs as one pattern: the reason is the text found.
NOT_APPLICABLE_TEXT = re.compile(
    "|".join(f"(?:{sign.in_run})" for sign in LOG_SIGNS
             if sign.in_run is not None and sign.kind == "not-applicable"),
    re.IGNORECASE)


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    uuid: str
    cc: Version | None
    memory_total: int | None


@dataclass
class HostGpus:
    """What the host's NVML says: driver, the CUDA version it supports, and the GPUs."""

    driver: str | None = None
    cuda_driver: Version | None = None
    gpus: list[Gpu] = field(default_factory=list)
    reason: str | None = None                 # why nothing could be read


def host_has_gpu(proc_root: Path = Path("/proc/driver/nvidia/gpus")) -> bool:
    """True when the NVIDIA kernel driver reports at least one GPU."""
    try:
        return any(proc_root.iterdir())
    except OSError:
        return os.path.exists("/dev/nvidiactl")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def probe(nvml: Any = None) -> HostGpus:
    """Driver, CUDA driver version and GPUs through pynvml (or a stand-in for tests)."""
    if nvml is None:
        try:
            nvml = importlib.import_module("pynvml")
        except ImportError:
            return HostGpus(reason="nvidia-ml-py is not installed (pip install 'harness[gpu]')")
    try:
        nvml.nvmlInit()
    except Exception as exc:  # pynvml.NVMLError: no library, no driver
        return HostGpus(reason=f"NVML unavailable: {exc}")
    out = HostGpus()
    try:
        out.driver = _text(nvml.nvmlSystemGetDriverVersion())
        try:
            v = int(nvml.nvmlSystemGetCudaDriverVersion_v2())
            out.cuda_driver = (v // 1000, (v % 1000) // 10)
        except Exception:
            pass
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(h)
            out.gpus.append(Gpu(i, _text(nvml.nvmlDeviceGetName(h)),
                                _text(nvml.nvmlDeviceGetUUID(h)), (int(major), int(minor)),
                                int(nvml.nvmlDeviceGetMemoryInfo(h).total)))
    except Exception as exc:
        out.reason = f"NVML query failed: {exc}"
    finally:
        nvml.nvmlShutdown()
    return out


def list_gpus() -> list[Gpu]:
    """GPUs through pynvml; [] when pynvml or the driver is missing."""
    return probe().gpus


def select(value: str, gpus: Sequence[Gpu]) -> list[Gpu] | None:
    """The GPUs a matrix selection (index, UUID, "all") names; None when one is absent."""
    if value == "all":
        return list(gpus)
    hit = [g for g in gpus if value in (str(g.index), g.uuid)]
    return hit or None


def parse_cuda_version(text: str | None) -> Version | None:
    """`11.1.1.017` / `11.8` / `cuda>=12.0 brand=tesla` -> (11, 1)."""
    if not text:
        return None
    m = re.search(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def image_cuda(labels: Mapping[str, str] | None,
               env: Sequence[str] | Mapping[str, str] | None) -> Version | None:
    """The CUDA version an image was built with, from its config, or None.

    NGC images set `ENV CUDA_VERSION=11.1.1.017` (20.12) and the label
    `com.nvidia.cuda.version`; nvidia/cuda base images set CUDA_VERSION and
    `NVIDIA_REQUIRE_CUDA=cuda>=11.8 ...`. `env` is the image config's `Env` list
    (`KEY=VALUE` strings) or a mapping.
    """
    if isinstance(env, Mapping):
        variables = dict(env)
    else:
        variables = dict(item.partition("=")[::2] for item in env or ())
    labels = labels or {}
    for text in (variables.get("CUDA_VERSION"), labels.get("com.nvidia.cuda.version")):
        found = parse_cuda_version(text)
        if found is not None:
            return found
    m = re.search(r"cuda>=(\d+\.\d+)", variables.get("NVIDIA_REQUIRE_CUDA", ""))
    return parse_cuda_version(m.group(1)) if m else None


def _v(v: Version) -> str:
    return f"{v[0]}.{v[1]}"


def _arch(cc: Version) -> str:
    name = ARCH_EXCEPTIONS.get(cc, ARCH.get(cc[0]))
    return f"compute capability {_v(cc)}" + (f" ({name})" if name else "")


def precheck(cuda: Version | None, gpu: Gpu | Version | None,
             driver_cuda: Version | None = None) -> tuple[str, str] | None:
    """Can an image built with CUDA `cuda` run on `gpu`? Decided before running it.

    Returns ("not-applicable", reason), ("degraded", reason), ("unsupported", reason)
    (NVIDIA does not support the pair but binaries of the same major may run: run it
    and decide from evidence), or None when it can run natively or too little is known
    (then `runtime_incompatibility` decides later).
    """
    cc = gpu.cc if isinstance(gpu, Gpu) else gpu
    if cuda is None or cc is None:
        return None
    for low, high, dropped in DROPPED_IN:
        if low <= cc <= high and cuda >= dropped:
            return ("not-applicable", f"CUDA {_v(dropped)} removed {_arch(cc)}; the image "
                    f"has CUDA {_v(cuda)}: run it on a newer GPU")
    if driver_cuda is not None and cuda[0] > driver_cuda[0]:
        return ("not-applicable", f"the image needs CUDA {_v(cuda)} but the driver supports "
                f"CUDA {_v(driver_cuda)}: upgrade the driver (forward-compatibility "
                "packages work on data-center GPUs only)")
    need = MIN_CUDA_FOR_CC.get(cc)
    if need is None and cc > max(MIN_CUDA_FOR_CC):
        newest = max(MIN_CUDA_FOR_CC)
        if cuda < MIN_CUDA_FOR_CC[newest]:
            need = MIN_CUDA_FOR_CC[newest]
        else:
            return ("degraded", f"PTX JIT: {_arch(cc)} is newer than any CUDA this harness "
                    f"knows; CUDA {_v(cuda)} can only JIT-compile PTX for it, if the image "
                    "ships PTX")
    if need is None:  # an unlisted older or embedded part: the nearest listed below
        known = [k for k in MIN_CUDA_FOR_CC if k <= cc]
        need = MIN_CUDA_FOR_CC[max(known)] if known else None
    if need is not None and cuda < need:
        # An 8.6 cubin does execute on 8.9 (same major, later minor: NVIDIA's binary
        # compatibility rule), though NVIDIA supports the GPU from CUDA `need` on and
        # older cuDNN/cuBLAS and ptxas (XLA) do not know it. Whether the image works is
        # then a question for a run, not a rule: "unsupported" runs the cell with a
        # short deadline and decides from what happened.
        same_major = [k for k, v in MIN_CUDA_FOR_CC.items()
                      if k[0] == cc[0] and k < cc and v <= cuda]
        if same_major:
            older = max(same_major)
            return ("unsupported", f"CUDA {_v(cuda)} predates {_arch(cc)}, supported from "
                    f"CUDA {_v(need)}; its sm_{older[0]}{older[1]} binaries may still run "
                    f"on it (same major): run with a short deadline, decided from evidence")
        return ("not-applicable", f"CUDA {_v(cuda)} predates {_arch(cc)}, supported from "
                f"CUDA {_v(need)}: run this image on an older GPU (e.g. the RTX 3090 host) "
                "or use a newer image")
    if driver_cuda is not None and cuda > driver_cuda:
        return ("degraded", f"PTX JIT unavailable: the image's CUDA {_v(cuda)} is newer than "
                f"the driver's {_v(driver_cuda)} (minor-version compatibility runs native "
                "code only)")
    return None


def compatibility(cuda: Version | None, cc: Version | None) -> str | None:
    """A reason the image cannot run natively on the GPU, or None (kept for callers)."""
    found = precheck(cuda, cc)
    return found[1] if found else None


def runtime_incompatibility(first_step_s: float | None, median_step_s: float | None,
                            log_text: str = "", baseline_first_s: float | None = None
                            ) -> tuple[str, str] | None:
    """Incompatibility seen while running, when the image's labels did not say.

    The logs decide first (CUDA's and the frameworks' own error texts); otherwise a first
    iteration that took minutes and hundreds of times the median step means every
    kernel was JIT-compiled from PTX. `baseline_first_s` (the same image's first step on
    another GPU) makes that call sharper. Returns (verdict, reason) or None.
    """
    for sign in LOG_SIGNS:
        if sign.after_run is not None and re.search(sign.after_run, log_text):
            return (sign.kind, sign.why)
    if first_step_s is None or not median_step_s or median_step_s <= 0:
        return None
    ratio = first_step_s / median_step_s
    slow_vs_other_gpu = (baseline_first_s is not None and first_step_s > 10 * baseline_first_s
                         and first_step_s > JIT_MIN_FIRST_S / 3)
    if (first_step_s >= JIT_MIN_FIRST_S and ratio >= JIT_MIN_RATIO) or slow_vs_other_gpu:
        return ("degraded", f"PTX JIT likely: the first iteration took {first_step_s:.0f} s, "
                f"{ratio:.0f}x the median step")
    return None


def device_request_kwargs(value: str) -> dict[str, Any]:
    """Arguments for docker.types.DeviceRequest selecting `value` ("all", index, UUID)."""
    if value == "all":
        return {"count": -1, "capabilities": [["gpu"]]}
    return {"device_ids": [value], "capabilities": [["gpu"]]}


def engine_gpu_mechanisms(info: Mapping[str, Any], hook_found: bool = False) -> list[str]:
    """How this engine can give a container GPUs, from `docker info` (empty: none seen).

    - the `nvidia` runtime registered by nvidia-container-toolkit (`--runtime nvidia`);
    - CDI devices `nvidia.com/gpu=...` the engine discovered (Docker 28 lists them under
      DiscoveredDevices; `--device nvidia.com/gpu=all`);
    - `--gpus` / DeviceRequest: needs API >= 1.40 and `nvidia-container-runtime-hook` on
      the daemon's PATH, which only a local check can see (`hook_found`).
    """
    found = []
    if "nvidia" in (info.get("Runtimes") or {}):
        found.append("nvidia runtime")
    cdi = [d.get("ID", "") for d in info.get("DiscoveredDevices") or []
           if d.get("Source") == "cdi" and str(d.get("ID", "")).startswith("nvidia.com/gpu")]
    if cdi:
        found.append(f"CDI ({len(cdi)} nvidia.com/gpu devices)")
    if hook_found:
        found.append("--gpus (nvidia-container-runtime-hook)")
    return found


def engine_gpu_support(info: Mapping[str, Any]) -> str | None:
    """From `docker info`: the first GPU mechanism the engine offers, or None.

    CDI spec directories alone (listed by default since Docker 25) are a weak sign, kept
    so that a remote engine whose `--gpus` hook cannot be seen from here is not refused.
    """
    found = engine_gpu_mechanisms(info)
    if not found and info.get("CDISpecDirs"):
        found.append("CDI")
    return found[0] if found else None
