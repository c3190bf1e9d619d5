"""torch_rfft: seed 000's loop in PyTorch, one torch.fft.rfft per step (a GPU host's control).

Seed report 000 (shared/seeds/000_28d548274b727520.txt) ran ``tf.signal.rfft(frames,
[512])`` on (144, 400) frames every ``session.run`` and saw memory and step time grow on
nvidia-tensorflow 1.15.5; the author's PyTorch control on the same new GPU host showed
nothing. This is that control: the same shapes through ``torch.fft.rfft(frames, n=512)``,
synchronized every step on a GPU (``torch.cuda.synchronize()``, which spin-waits), so a
step's time is the device's.

Params (all optional):
  input      random | variable | constant        (default random)
             random: torch.rand on the device every step (the seed's leaking case);
             variable: random frames made once and reused (the seed's tf.Variable);
             constant: torch.zeros made once.
  lengths    fixed | new | cycle                  (default fixed)
             new: a new FFT length every step (512 + 2 * step): on CUDA each one builds a
             cuFFT plan that PyTorch keeps in its plan cache, device memory outside the
             caching allocator (the mechanism behind seed 000's growth).
             cycle: the lengths 512 + 2 * (step % cycle), over and over: the plan cache
             fills for `cycle` calls and then holds (a bounded cache of compiled objects).
  cycle      an int >= 1                          (default 600; lengths: cycle only)
  plan_cache an int >= 0                          (default 0: PyTorch's own maximum)
             caps the CUDA plan cache (then a `new`-lengths run fills it and plateaus).
  device     auto | cpu | cuda                    (default auto: cuda when PyTorch sees a
             GPU, else cpu)

fw_bytes() is ``torch.cuda.memory_allocated`` (the caching allocator's live bytes) on
CUDA, None on the CPU (PyTorch has no CPU allocator count). info() says the device the
tensors were on (``cuda:0`` or ``cpu``), the GPU's name, PyTorch's version and CUDA
build, the plan cache's size and the allocator's peak.
"""

import _params  # shared param parsing (stdlib only), next to this file

FRAMES_SHAPE = (144, 400)
FFT_LENGTH = 512

_PARAM_SPEC = {
    "input": ("random", ("random", "variable", "constant")),
    "lengths": ("fixed", ("fixed", "new", "cycle")),
    "cycle": (600, ("int_strict", 1)),
    "plan_cache": (0, ("int_strict", 0)),
    "device": ("auto", ("auto", "cpu", "cuda")),
}


def setup(params):
    p = _params.parse("torch_rfft", params, _PARAM_SPEC)
    import torch

    cuda = torch.cuda.is_available()
    if p["device"] == "cuda" and not cuda:
        raise RuntimeError("torch_rfft: device 'cuda' asked for, but PyTorch sees no GPU "
                           "(torch {}, CUDA build {}); use device: auto or cpu".format(
                               torch.__version__, torch.version.cuda))
    use_cuda = cuda and p["device"] != "cpu"
    dev = torch.device("cuda", torch.cuda.current_device()) if use_cuda else torch.device("cpu")
    if use_cuda and p["plan_cache"]:
        torch.backends.cuda.cufft_plan_cache[dev.index].max_size = p["plan_cache"]
    gen = torch.Generator(device=dev)
    gen.manual_seed(0)
    frames = None
    if p["input"] == "variable":
        frames = torch.rand(FRAMES_SHAPE, generator=gen, device=dev)
    elif p["input"] == "constant":
        frames = torch.zeros(FRAMES_SHAPE, device=dev)
    return {"torch": torch, "p": p, "dev": dev, "cuda": use_cuda, "gen": gen,
            "frames": frames, "steps": 0, "last_shape": None}


def step(state):
    torch = state["torch"]
    state["steps"] += 1
    frames = state["frames"]
    if frames is None:
        frames = torch.rand(FRAMES_SHAPE, generator=state["gen"], device=state["dev"])
    lengths = state["p"]["lengths"]
    n = FFT_LENGTH
    if lengths == "new":
        n += 2 * state["steps"]
    elif lengths == "cycle":
        n += 2 * (state["steps"] % state["p"]["cycle"])
    spec = torch.fft.rfft(frames, n=n)
    if state["cuda"]:
        torch.cuda.synchronize(state["dev"])
    state["last_shape"] = tuple(spec.shape)


def fw_bytes(state):
    if not state["cuda"]:
        return None
    return int(state["torch"].cuda.memory_allocated(state["dev"]))


def info(state):
    torch = state["torch"]
    out = {"torch": torch.__version__, "cuda_build": torch.version.cuda,
           "device": str(state["dev"]), "params": dict(state["p"]), "steps": state["steps"],
           "spec_shape": list(state["last_shape"] or ())}
    if state["cuda"]:
        idx = state["dev"].index
        out["gpu"] = torch.cuda.get_device_name(idx)
        out["fw_peak_bytes"] = int(torch.cuda.max_memory_allocated(state["dev"]))
        cache = torch.backends.cuda.cufft_plan_cache[idx]
        out["plan_cache"] = {"size": int(cache.size), "max_size": int(cache.max_size)}
    return out
