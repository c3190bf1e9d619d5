"""Unit boundary of the GPU fixes (the end-to-end checks are in
tests/integration/test_gpu_sim.py, on the simulated GPU hosts)."""

from __future__ import annotations

import json
from typing import Any

from harness.analysis.decision import within_run
from harness.analysis.outcomes import allocation_report
from harness.gpu import engine as gpuprobe
from harness.gpu.host import memory_info
from harness.matrixfile.model import GpuSel
from harness.protocol.ingest import parse_lines
from harness.runtimes.base import RunOutcome
from harness.runtimes.dockerengine import split_ref
from harness.runtimes.local import gpu_env
from harness.thresholds import AnalysisConfig

GiB = 1 << 30


def lines(recs: list[dict[str, Any]]) -> list[bytes]:
    return [(json.dumps(r) + "\n").encode() for r in recs]


def heap_series(values: list[int], func: str = "mallinfo") -> Any:
    recs: list[dict[str, Any]] = [{"type": "header", "schema": 1,
                                   "heap": {"func": func, "note": "x"}}]
    for k, v in enumerate(values, 1):
        recs.append({"type": "sample", "src": "step", "phase": "measure", "i": 10 * k,
                     "t": k, "heap": v, "dt": [0.001] * 10})
    recs.append({"type": "end", "status": "ok", "iterations": 10 * len(values)})
    return parse_lines(lines(recs))


def test_mallinfo_wrap_is_unwrapped_across_samples_and_said() -> None:
    # a heap growing 600 MiB per sample from 3 GiB: the agent's 32-bit reading wraps
    true = [3 * GiB + k * 600 * (1 << 20) for k in range(8)]
    s = heap_series([v % (1 << 32) for v in true])
    assert [x["heap"] for x in s.samples] == [float(v) for v in true]
    assert s.notes and "1 wrap(s) unwrapped" in s.notes[0]
    # mallinfo2 (glibc >= 2.33) is never touched
    plain = heap_series([v % (1 << 32) for v in true], func="mallinfo2")
    assert plain.notes == [] and plain.samples[-1]["heap"] < true[-1]


def test_unwrapped_heap_decides_a_leak() -> None:
    true = [3 * GiB + k * 64 * (1 << 20) for k in range(60)]
    s = heap_series([v % (1 << 32) for v in true])
    v = within_run(s, RunOutcome(exit_code=0), AnalysisConfig())
    assert v.verdict == "leak" and v.carrier == "heap", v.reason


def test_tf_gpu_oom_is_oom_with_the_allocation_report() -> None:
    log = ("Current allocation summary follows.\n"
           "I bfc_allocator.cc:921] Sum Total of in-use chunks: 22.91GiB\n"
           "Limit:  25769803776\nInUse:  25768755200\n"
           "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when "
           "allocating tensor with shape[268435456] and type float on GPU:0\n")
    s = parse_lines(lines([{"type": "header", "schema": 1},
                           {"type": "end", "status": "error",
                            "error": {"type": "ResourceExhaustedError", "message": "OOM",
                                      "traceback": ""}}]))
    v = within_run(s, RunOutcome(exit_code=1, log_tail=log), AnalysisConfig())
    assert v.verdict == "oom"
    assert "Sum Total of in-use chunks: 22.91GiB" in v.reason and "Limit:" in v.reason
    assert "OOM when allocating tensor with shape[268435456]" in v.reason


def test_pytorch_cuda_oom_and_no_false_positive_on_success() -> None:
    log = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB "
           "(GPU 0; 23.69 GiB total capacity; 22.71 GiB already allocated)")
    assert allocation_report(log) == [log[log.index("Tried"):]]
    s = parse_lines(lines([{"type": "header", "schema": 1},
                           {"type": "end", "status": "ok", "iterations": 0}]))
    # a run that logged the words but ended fine is not an OOM
    assert within_run(s, RunOutcome(exit_code=0, log_tail=log), AnalysisConfig()).verdict != "oom"


def test_pull_splits_digests_and_registry_ports() -> None:
    digest = "sha256:" + "a" * 64
    assert split_ref(f"nvcr.io/nvidia/tensorflow@{digest}") == ("nvcr.io/nvidia/tensorflow",
                                                                digest)
    assert split_ref("localhost:5000/x") == ("localhost:5000/x", "latest")
    assert split_ref("nvcr.io/nvidia/tensorflow:20.12-tf1-py3") == (
        "nvcr.io/nvidia/tensorflow", "20.12-tf1-py3")


class _Cell:
    def __init__(self, value: str):
        self.gpu = GpuSel(value)


def test_local_runtime_restricts_nvml_and_orders_cuda_by_pci_bus() -> None:
    env = gpu_env(_Cell("1"))  # type: ignore[arg-type]
    assert env == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1",
                   "HARNESS_NVML_DEVICES": "1"}
    assert gpu_env(_Cell("all")) == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}  # type: ignore[arg-type]
    assert gpu_env(_Cell("none")) == {"CUDA_VISIBLE_DEVICES": ""}  # type: ignore[arg-type]


class _Mem:
    def __init__(self, **kw: int):
        self.__dict__.update(kw)


class _PyNvml:
    nvmlMemory_v2 = 0x02000028

    def __init__(self, v2: bool):
        self.v2 = v2

    def nvmlDeviceGetMemoryInfo(self, h: Any, version: int | None = None) -> _Mem:
        if version is not None:
            if not self.v2:
                raise RuntimeError("Function Not Found")
            return _Mem(total=24 * GiB, reserved=333 << 20, used=2 << 20, free=0)
        return _Mem(total=24 * GiB, used=335 << 20, free=0)  # R510+: reserved counted


def test_host_sampler_reads_v2_with_reserved_apart() -> None:
    assert memory_info(_PyNvml(True), 0) == (2 << 20, 24 * GiB, 333 << 20)
    assert memory_info(_PyNvml(False), 0) == (335 << 20, 24 * GiB, None)


def test_probe_output_after_an_entrypoint_banner() -> None:
    out = ("== TensorFlow ==\nNVIDIA Release 22.12-tf1\n" + json.dumps(
        {"driver": "525.147.05", "cuda_driver": "12.0", "devices": [
            {"index": 0, "name": "NVIDIA GeForce RTX 4090", "uuid": "GPU-1", "cc": [8, 9],
             "memory_total": 24 * GiB}]}) + "\n")
    host = gpuprobe.parse(out)
    assert host.cuda_driver == (12, 0) and host.gpus[0].cc == (8, 9)
    assert gpuprobe.describe(host) == ("1x NVIDIA GeForce RTX 4090 (8.9), driver 525.147.05, "
                                       "CUDA 12.0")
    none = gpuprobe.parse('{"reason": "cannot load libnvidia-ml.so.1"}\n')
    assert none.gpus == [] and "libnvidia-ml" in (none.reason or "")


def test_notes_and_no_gpu_are_said_in_the_reason() -> None:
    from harness.analysis.decision import CellFacts, cell_flags, decide

    s = heap_series([(3 * GiB + k * 600 * (1 << 20)) % (1 << 32) for k in range(8)])
    s.end = {"status": "ok", "info": {"device": "cpu"}}
    flags = cell_flags(True, "ok", s)
    assert [f.kind for f in flags] == ["no-gpu", "heap-note"]
    assert flags[0].text.startswith("no-gpu: a GPU cell, but the framework saw no GPU")
    assert "mallinfo(), which wraps at 4 GiB; 1 wrap(s) unwrapped" in flags[1].text
    # The verdict is built once with them: in its findings and said in its reason.
    v = decide(CellFacts(AnalysisConfig(), s, RunOutcome(exit_code=0), wants_gpu=True))
    assert v.reason.endswith("; " + flags[0].text + "; " + flags[1].text)
    assert v.has("no-gpu") and v.has("heap-note")
    assert cell_flags(False, "ok", heap_series([1 << 20] * 8)) == []
