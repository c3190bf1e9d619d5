"""Host-side GPU facts, one module per concern (this face only hands their names on): `host`
(the driver and GPUs through NVML, their memory during a cell), `cuda` (compatibility tables,
an image's precheck, log signs of an image that cannot use the GPU), `engine` (the GPUs a
Docker engine gives containers).
"""

from harness.gpu.cuda import (
    ARCH,
    ARCH_EXCEPTIONS,
    DROPPED_IN,
    LOG_SIGNS,
    MIN_CUDA_FOR_CC,
    NOT_APPLICABLE_TEXT,
    LogSign,
    SignKind,
    compatibility,
    image_cuda,
    parse_cuda_version,
    precheck,
)
from harness.gpu.engine import device_request_kwargs, engine_gpu_mechanisms, engine_gpu_support
from harness.gpu.host import Gpu, HostGpus, Version, host_has_gpu, list_gpus, probe, select

__all__ = [
    "ARCH", "ARCH_EXCEPTIONS", "DROPPED_IN", "LOG_SIGNS",
    "MIN_CUDA_FOR_CC", "NOT_APPLICABLE_TEXT", "Gpu", "HostGpus", "LogSign", "SignKind",
    "Version", "compatibility", "device_request_kwargs", "engine_gpu_mechanisms",
    "engine_gpu_support", "host_has_gpu", "image_cuda", "list_gpus", "parse_cuda_version",
    "precheck", "probe", "select",
]
