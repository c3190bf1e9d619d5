"""This machine's GPUs as its driver and NVML (the optional `pynvml`) say, the GPUs a
matrix's `gpu:` selects, and their memory during a cell (`HostGpuSampler`, `reconcile`).
Figures are device-level (a container's NVML cannot map its PIDs), so one cell runs per
GPU; Docker's `device_ids` are NVML indices, as here.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
import time
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


MiB = 1024 * 1024
NO_PYNVML = "nvidia-ml-py is not installed (pip install 'harness[gpu]')"


class HostGpuSampler:
    """Samples used/total memory of the GPUs a cell selected, on a thread: at `start()`
    (before the container starts), every `interval` s, and at `stop()`, which returns
    `[{"t", "gpu", "uuid", "used", "total"}]`. Never raises; [] and `reason` without NVML.
    """

    def __init__(self, selection: str, interval: float = 0.5, nvml: Any = None):
        self.selection = selection
        self.interval = interval
        self.reason: str | None = None
        self.samples: list[dict[str, Any]] = []
        self._nvml = nvml
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def start(self) -> HostGpuSampler:
        if self.selection == "none":
            self.reason = "CPU-only cell"
            return self
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name=f"host-nvml-{self.selection}")
        self._thread.start()
        self._ready.wait(timeout=10)
        return self

    def stop(self) -> list[dict[str, Any]]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        return list(self.samples)

    def _loop(self) -> None:
        try:
            nv = self._nvml if self._nvml is not None else importlib.import_module("pynvml")
            nv.nvmlInit()
        except ImportError:
            self.reason = NO_PYNVML
            self._ready.set()
            return
        except Exception as exc:  # pynvml.NVMLError and friends: no driver, no library
            self.reason = f"NVML unavailable on the host: {exc}"
            self._ready.set()
            return
        try:
            devices = self._devices(nv)
            self._sample(nv, devices)
            self._ready.set()
            while not self._stop.wait(self.interval):
                self._sample(nv, devices)
            self._sample(nv, devices)
        except Exception as exc:  # a sampler must never take the cell down
            self.reason = f"host NVML sampling stopped: {exc}"
        finally:
            self._ready.set()
            with contextlib.suppress(Exception):
                nv.nvmlShutdown()

    def _devices(self, nv: Any) -> list[tuple[int, str, Any]]:
        if self.selection == "all":
            handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
        elif self.selection.isdigit():
            handles = [nv.nvmlDeviceGetHandleByIndex(int(self.selection))]
        else:
            handles = [nv.nvmlDeviceGetHandleByUUID(self.selection)]
        out = []
        for h in handles:
            uuid = nv.nvmlDeviceGetUUID(h)
            out.append((int(nv.nvmlDeviceGetIndex(h)),
                        uuid.decode() if isinstance(uuid, bytes) else str(uuid), h))
        return out

    def _sample(self, nv: Any, devices: list[tuple[int, str, Any]]) -> None:
        t = round(time.monotonic() - self._t0, 3)
        for index, uuid, h in devices:
            used, total, reserved = memory_info(nv, h)
            self.samples.append({"t": t, "gpu": index, "uuid": uuid, "used": used,
                                 "total": total, "reserved": reserved})


def memory_info(nv: Any, handle: Any) -> tuple[int, int, int | None]:
    """(used, total, reserved) of a device: v2 reports the driver's reservation apart
    (v1 counts it as used since R510); v1 is the fallback (reserved None)."""
    version = getattr(nv, "nvmlMemory_v2", None)
    if version is not None:
        try:
            mem = nv.nvmlDeviceGetMemoryInfo(handle, version=version)
            return int(mem.used), int(mem.total), int(mem.reserved)
        except Exception:  # TypeError (old binding), NVMLError (old driver): use v1
            pass
    mem = nv.nvmlDeviceGetMemoryInfo(handle)
    return int(mem.used), int(mem.total), None


def _stats(values: list[float]) -> dict[str, float] | None:
    return {"first": values[0], "peak": max(values), "last": values[-1]} if values else None


def reconcile(agent: list[dict[str, Any]], host_cgroup: list[dict[str, Any]],
              host_gpu: list[dict[str, Any]], tolerance: float = 0.05,
              floor: int = 64 * MiB) -> dict[str, Any]:
    """The agent's, the engine's and the host NVML's memory figures side by side: {"sources":
    {name: {first, peak, last}}, "flags": [what disagrees, and why]}.

    Args:
        agent: the agent's sample records (`rss`, `rss_anon`, `cgroup`, `gpu_used`).
        host_cgroup, host_gpu: engine stats samples (`usage`); HostGpuSampler's (`gpu`, `used`).
        tolerance, floor: the relative and absolute differences accepted (sampling rates differ).
    """
    def series(rows: list[dict[str, Any]], key: str) -> list[float]:
        return [float(r[key]) for r in rows if isinstance(r.get(key), (int, float))]

    gpu_total: dict[float, float] = {}
    for s in host_gpu:
        gpu_total[s["t"]] = gpu_total.get(s["t"], 0.0) + float(s["used"])
    sources = {
        "rss": _stats(series(agent, "rss")),
        "rss_anon": _stats(series(agent, "rss_anon")),
        "cgroup": _stats(series(agent, "cgroup")),
        "engine_cgroup": _stats(series(host_cgroup, "usage")),
        "gpu_agent": _stats(series(agent, "gpu_used")),
        "gpu_host": _stats([gpu_total[t] for t in sorted(gpu_total)]),
    }
    flags: list[str] = []

    def apart(a: float, b: float) -> bool:
        return abs(a - b) > max(floor, tolerance * max(a, b))

    def mib(x: float) -> str:
        return f"{x / MiB:.0f} MiB"

    ga, gh = sources["gpu_agent"], sources["gpu_host"]
    if ga and gh and apart(ga["peak"], gh["peak"]):
        flags.append(f"GPU memory: agent NVML peak {mib(ga['peak'])} vs host NVML peak "
                     f"{mib(gh['peak'])} (device-level on both sides: a short spike between "
                     "host samples, or the agent saw other devices)")
    if gh and gh["first"] > floor:
        flags.append(f"GPU already held {mib(gh['first'])} before the cell started: another "
                     "process shares the GPU and is counted in every device figure")
    cg, eng = sources["cgroup"], sources["engine_cgroup"]
    if cg and eng and apart(cg["peak"], eng["peak"]):
        flags.append(f"cgroup: agent read peak {mib(cg['peak'])}, engine stats peak "
                     f"{mib(eng['peak'])} (engine stats are 1 Hz; cgroup v1 counts page cache)")
    # Anonymous RSS: a shared library's file pages are charged to whichever container
    # read them first, so RSS may exceed a later container's cgroup harmlessly.
    anon = sources.get("rss_anon")
    box = cg or eng
    if anon and box and anon["peak"] > box["peak"] + max(floor, tolerance * box["peak"]):
        flags.append(f"process anonymous RSS peak {mib(anon['peak'])} exceeds the cgroup's "
                     f"{mib(box['peak'])}: the figures come from different cgroups")
    return {"sources": {k: v for k, v in sources.items() if v is not None}, "flags": flags}
