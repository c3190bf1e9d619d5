"""Stage 2, the GPU precheck: not-applicable (the GPU is not on the host, the image's CUDA
cannot run on it) or unsupported (run briefly: what happens decides), from the image's
CUDA and the host's GPUs, probed once per engine."""

from __future__ import annotations

import threading
from collections.abc import Callable

from harness import gpu
from harness.matrixfile.model import Cell
from harness.runtimes.base import ImageInfo, Runtime


class GpuFacts:
    """The GPUs each host's engine shows, probed once per engine (not once per lane)."""

    def __init__(self, runtime_for: Callable[[Cell], Runtime]):
        self.runtime_for = runtime_for
        self.seen: dict[str, gpu.HostGpus] = {}   # host label -> what its engine showed
        self._local: gpu.HostGpus | None = None
        self._lock = threading.Lock()

    def host_gpus(self, cell: Cell, info: ImageInfo) -> gpu.HostGpus | None:
        """The cell's host's GPUs: through its engine (a probe container) where the
        runtime can, else this machine's NVML for a local host; None for another host."""
        with self._lock:
            found = self.runtime_for(cell).gpu_inventory(info.ref, info.python or "python3")
            if found is not None:
                self.seen[cell.host.label] = found
                return found
            if not cell.host.is_local:
                return None
            if self._local is None:
                self._local = gpu.probe()
            return self._local

    def precheck(self, cell: Cell, info: ImageInfo) -> tuple[str, str] | None:
        """not-applicable / unsupported / degraded from the image's CUDA and the GPU, or
        None."""
        if not cell.gpu.wants_gpu:
            return None
        host = self.host_gpus(cell, info)
        if host is not None and host.gpus and gpu.select(cell.gpu.value, host.gpus) is None:
            have = ", ".join(f"{g.index} ({g.name})" for g in host.gpus)
            return ("not-applicable", f"GPU {cell.gpu.value} is not on host {cell.host.label} "
                    f"(its GPUs: {have})")
        cuda = gpu.image_cuda(info.labels, info.env)
        if cuda is None or host is None:
            return None
        worst: tuple[str, str] | None = None
        for g in gpu.select(cell.gpu.value, host.gpus) or []:
            found = gpu.precheck(cuda, g, host.cuda_driver)
            if found is not None and (worst is None or found[0] == "not-applicable"):
                worst = found
        return worst
