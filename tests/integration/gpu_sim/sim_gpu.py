"""A simulated GPU framework for the simulated GPU hosts (images/setup-gpu-sim.sh).

It "allocates" device memory by raising the per-GPU counter files that the fake
libnvidia-ml.so.1 adds to `used` (/run/nvidia-sim/<uuid>.used, one per GPU the fake
nvidia-container-runtime-hook gave this container), so a device-memory leak is visible
end to end through the agent's NVML reads. No kernel runs: simulated figures.

Params:
  alloc     bytes added on every GPU per step and never given back (default 0)
  oom_at    step at which to fail the way TensorFlow's BFC allocator does on a full GPU:
            its allocation summary to stderr, then ResourceExhaustedError (default: never)
  hold_s    seconds to sleep per step (default 0), to make cells overlap if they could
  from_cuda alloc only in images whose CUDA_VERSION is this one or later ("11.8": a leak
            that came with the 22.12 image, on every GPU; default: every image)
  sm_check  true: fail at setup as a CUDA 11.1-11.7 build fails on compute capability 8.9
            when it has no binary for it ("no kernel image is available"), judged from
            the image's CUDA_VERSION and the GPU profile (default false)
info(): the GPUs this container was given (UUIDs from the profile), whether the NVML
library was injected, and wall-clock start/end (to check one cell per GPU at a time).
Stdlib only, Python 3.6 syntax (runs in the Python 3.7 NGC stand-ins).
"""

import os
import sys
import time

STATE = "/run/nvidia-sim"
LIB = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"


def _uuids():
    try:
        with open(os.path.join(STATE, "profile")) as f:
            return [line.split()[1] for line in f if line.startswith("gpu ")]
    except OSError:
        return []


def _cc_and_cuda():
    cc = None
    try:
        with open(os.path.join(STATE, "profile")) as f:
            for line in f:
                if line.startswith("gpu "):
                    cc = tuple(int(x) for x in line.split()[2].split("."))
                    break
    except OSError:
        pass
    cuda = tuple(int(x) for x in os.environ.get("CUDA_VERSION", "0.0").split(".")[:2])
    return cc, cuda


def setup(params):
    if str(params.get("sm_check", "false")).lower() == "true":
        cc, cuda = _cc_and_cuda()
        if cc == (8, 9) and cuda < (11, 8):
            sys.stderr.write("2022-12-01 12:00:00.000000: E tensorflow/stream_executor/cuda/"
                             "cuda_driver.cc] CUDA error: no kernel image is available for "
                             "execution on the device\n")
            raise RuntimeError("simulated: no kernel image for sm_89 in a CUDA 11.1 build")
    alloc = int(params.get("alloc", 0))
    if params.get("from_cuda") is not None:
        since = tuple(int(x) for x in str(params["from_cuda"]).split(".")[:2])
        if _cc_and_cuda()[1] < since:
            alloc = 0
    return {"alloc": alloc, "oom_at": int(params.get("oom_at", -1)),
            "hold_s": float(params.get("hold_s", 0)), "uuids": _uuids(), "held": 0,
            "steps": 0, "start": time.time()}


def _raise_oom(state):
    total = 24 * 1024 ** 3
    in_use = total - 2 ** 20
    sys.stderr.write(
        "W tensorflow/core/common_runtime/bfc_allocator.cc:419] Allocator (GPU_0_bfc) ran "
        "out of memory trying to allocate 1.00GiB (rounded to 1073741824).\n"
        "Current allocation summary follows.\n"
        "I tensorflow/core/common_runtime/bfc_allocator.cc:921] Sum Total of in-use chunks: "
        "22.91GiB\n"
        f"Limit:                 {total}\nInUse:                 {in_use}\n"
        f"MaxInUse:              {in_use}\n")
    sys.stderr.flush()
    message = ("OOM when allocating tensor with shape[268435456] and type float on "
               "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc")
    try:
        import tensorflow as tf
        raise tf.errors.ResourceExhaustedError(None, None, message)
    except ImportError:
        raise MemoryError("ResourceExhaustedError: " + message) from None


def step(state):
    state["steps"] += 1
    if state["steps"] == state["oom_at"]:
        _raise_oom(state)
    if state["alloc"] and state["uuids"]:
        state["held"] += state["alloc"]
        for uuid in state["uuids"]:
            path = os.path.join(STATE, uuid + ".used")
            with open(path + ".tmp", "w") as f:
                f.write(str(state["held"]))
            os.rename(path + ".tmp", path)
    if state["hold_s"]:
        time.sleep(state["hold_s"])


def info(state):
    return {"device": "gpu" if state["uuids"] else "cpu", "uuids": state["uuids"],
            "nvml_lib": os.path.exists(LIB), "start": state["start"], "end": time.time(),
            "allocated": state["held"]}
