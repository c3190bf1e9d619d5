"""Device names as frameworks report them: a GPU, or a CPU fallback (issue 20 point 2)."""

from __future__ import annotations

import pytest

from harness.analysis.facts import device_kind

GPU = ["cuda", "cuda:1", "GPU", "/device:GPU:0", "/GPU:0",
       "/job:localhost/replica:0/task:0/device:GPU:0",          # TensorFlow
       "cuda:0", "CudaDevice(id=0)", "gpu:0", "rocm:0",         # JAX
       "<CUDA Device 0>",                                        # CuPy
       "CUDAExecutionProvider", "TensorrtExecutionProvider", "ROCMExecutionProvider",
       "['CUDAExecutionProvider', 'CPUExecutionProvider']"]     # ONNX Runtime
CPU = ["cpu", "CPU", "cpu:0", "/device:CPU:0", "/job:localhost/replica:0/task:0/device:CPU:0",
       "TFRT_CPU_0", "CpuDevice(id=0)", "CPUExecutionProvider", "['CPUExecutionProvider']"]


@pytest.mark.parametrize("name", GPU)
def test_gpu_names(name: str) -> None:
    assert device_kind(name) == "gpu"


@pytest.mark.parametrize("name", CPU)
def test_cpu_fallbacks(name: str) -> None:
    assert device_kind(name) == "cpu"


@pytest.mark.parametrize("name", ["", "weird", "npu-7"])
def test_unknown_names_are_not_taken_for_a_fallback(name: str) -> None:
    assert device_kind(name) == "unknown"
