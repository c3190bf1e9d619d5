"""gpu_small_leak: a small device-memory leak with no Python object kept (a GPU host's
native-only leak): each step takes 512 bytes from PyTorch's caching allocator
(``torch.cuda.caching_allocator_alloc``) and never gives them back, the way a native
extension that forgets a free would.

The host heap holds nothing (the pointer is a plain int, dropped); the allocator's live
bytes (fw) grow exactly 512 B per call; NVML sees a new 2 MiB segment every 4,096 calls
(a staircase). Expected: leak, carried by fw, about 512 B/call.

Params (all optional):
  size  an int >= 1   (default 512: bytes leaked per call; the allocator rounds up to 512)
"""

import _params  # shared param parsing (stdlib only), next to this file

_PARAM_SPEC = {"size": (512, ("int_strict", 1))}


def setup(params):
    p = _params.parse("gpu_small_leak", params, _PARAM_SPEC)
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("gpu_small_leak: PyTorch sees no GPU (torch {}, CUDA build {})".format(
            torch.__version__, torch.version.cuda))
    return {"torch": torch, "p": p, "steps": 0}


def step(s):
    s["torch"].cuda.caching_allocator_alloc(s["p"]["size"])
    s["steps"] += 1


def fw_bytes(s):
    return int(s["torch"].cuda.memory_allocated())


def info(s):
    return {"torch": s["torch"].__version__, "steps": s["steps"],
            "gpu": s["torch"].cuda.get_device_name()}
