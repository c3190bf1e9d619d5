"""This machine's GPUs as its driver and NVML say: the driver, the CUDA version it
supports, each GPU's name, UUID, compute capability and memory, and the GPUs a matrix's
`gpu:` value selects.

NVML on the host comes from `nvidia-ml-py` (`pynvml`) when installed; without it the
driver's /proc files still say whether GPUs exist.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Version = tuple[int, int]


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
