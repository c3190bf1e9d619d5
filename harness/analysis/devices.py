"""Where a framework says it ran: the GPU, or a CPU fallback.

Scenarios report the device their framework used (`info()["device"]`); each framework
names it its own way. A GPU cell is flagged "no-gpu" only when the name is a CPU one:
a name this module does not know is not taken for a fallback.
"""

from __future__ import annotations

import re
from typing import Literal

__all__ = ["DeviceKind", "device_kind"]

DeviceKind = Literal["gpu", "cpu", "unknown"]

# Checked in order on the lower-cased name; the first pattern that matches decides.
_NAMES: tuple[tuple[DeviceKind, re.Pattern[str]], ...] = (
    # ONNX Runtime execution providers (a list of them is reported as one string).
    ("gpu", re.compile(r"(cuda|tensorrt|rocm|migraphx|dml)executionprovider")),
    ("cpu", re.compile(r"^\W*cpuexecutionprovider\W*$")),
    # TensorFlow: /device:GPU:0, /job:localhost/replica:0/task:0/device:GPU:0, GPU:0.
    ("gpu", re.compile(r"(^|[/:])gpu(:\d+)?\b|^gpu\b")),
    # PyTorch cuda / cuda:1, CuPy <CUDA Device 0>, JAX cuda:0 / CudaDevice(id=0) /
    # gpu:0 / rocm:0, Apple's mps, XLA's TPU.
    ("gpu", re.compile(r"\bcuda|cudadevice|<cuda device|\brocm|\bmps\b|\btpu")),
    # CPU names: cpu, cpu:0, /device:CPU:0, TFRT_CPU_0, CpuDevice(id=0), JAX's cpu.
    ("cpu", re.compile(r"\bcpu\b|[/:_]cpu|cpudevice|^cpu")),
)


def device_kind(name: str) -> DeviceKind:
    """"gpu", "cpu" or "unknown" for a device name as a framework reports it.

    Example:
        >>> [device_kind(n) for n in ("cuda:0", "/device:CPU:0", "CUDAExecutionProvider")]
        ['gpu', 'cpu', 'gpu']
    """
    text = name.strip().lower()
    for kind, pattern in _NAMES:
        if pattern.search(text):
            return kind
    return "unknown"
