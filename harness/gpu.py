"""Host-side GPU facts, kept in one module: is there a driver, which GPUs, which
compute capability, and whether an image's CUDA can run on it.

NVML on the host comes from `nvidia-ml-py` (`pynvml`) when installed; without it the
driver's /proc files still say whether GPUs exist. Compatibility follows NVIDIA's CUDA
compatibility notes: a GPU of compute capability X.Y needs a CUDA toolkit that knows
it (e.g. 8.9, Ada/RTX 4090, first in CUDA 11.8; 9.0, Hopper, in 11.8; 8.6 in 11.1).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# First CUDA release with native (SASS) support per compute capability.
MIN_CUDA_FOR_CC: dict[tuple[int, int], tuple[int, int]] = {
    (7, 0): (9, 0), (7, 5): (10, 0), (8, 0): (11, 0), (8, 6): (11, 1), (8, 7): (11, 4),
    (8, 9): (11, 8), (9, 0): (11, 8), (10, 0): (12, 8), (12, 0): (12, 8),
}


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    uuid: str
    cc: tuple[int, int] | None
    memory_total: int | None


def host_has_gpu(proc_root: Path = Path("/proc/driver/nvidia/gpus")) -> bool:
    """True when the NVIDIA kernel driver reports at least one GPU."""
    try:
        return any(proc_root.iterdir())
    except OSError:
        return os.path.exists("/dev/nvidiactl")


def list_gpus() -> list[Gpu]:
    """GPUs through pynvml; [] when pynvml or the driver is missing."""
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except Exception:
        return []
    out: list[Gpu] = []
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name: Any = pynvml.nvmlDeviceGetName(h)
            uuid: Any = pynvml.nvmlDeviceGetUUID(h)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            out.append(Gpu(i, name.decode() if isinstance(name, bytes) else str(name),
                           uuid.decode() if isinstance(uuid, bytes) else str(uuid),
                           (int(major), int(minor)), int(mem.total)))
    finally:
        pynvml.nvmlShutdown()
    return out


def parse_cuda_version(text: str | None) -> tuple[int, int] | None:
    """`11.1.1.017` / `11.8` / `CUDA_VERSION=12.0.0` -> (11, 1)."""
    if not text:
        return None
    m = re.search(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def compatibility(cuda: tuple[int, int] | None, cc: tuple[int, int] | None) -> str | None:
    """A reason the image cannot run natively on the GPU, or None if it can (or unknown)."""
    if cuda is None or cc is None:
        return None
    need = MIN_CUDA_FOR_CC.get(cc)
    if need is None:
        known = [k for k in MIN_CUDA_FOR_CC if k <= cc]
        need = MIN_CUDA_FOR_CC[max(known)] if known else None
    if need is not None and cuda < need:
        return (f"CUDA {cuda[0]}.{cuda[1]} predates compute capability {cc[0]}.{cc[1]} "
                f"(needs CUDA >= {need[0]}.{need[1]})")
    return None


def device_request_kwargs(value: str) -> dict[str, Any]:
    """Arguments for docker.types.DeviceRequest selecting `value` ("all", index, UUID)."""
    if value == "all":
        return {"count": -1, "capabilities": [["gpu"]]}
    return {"device_ids": [value], "capabilities": [["gpu"]]}


def engine_gpu_support(info: dict[str, Any]) -> str | None:
    """From `docker info`: which GPU mechanism the engine offers, or None."""
    runtimes = info.get("Runtimes") or {}
    if "nvidia" in runtimes:
        return "nvidia runtime"
    if info.get("CDISpecDirs"):
        return "CDI"
    return None
