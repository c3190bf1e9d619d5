"""jax_rfft: seed 000's loop in JAX, one jnp.fft.rfft per step (a GPU host's control).

The PyTorch control is ``torch_rfft.py``; this is the same loop for JAX: (144, 400)
frames through ``jnp.fft.rfft(frames, n=512)``, waited for every step
(``block_until_ready``), on the first GPU JAX sees or on the CPU.

JAX preallocates most of a GPU at start (XLA_PYTHON_CLIENT_PREALLOCATE), so NVML's used
memory stays flat whatever the loop keeps: a device leak shows only in the framework
allocator's ``bytes_in_use``, which fw_bytes() reports.

Params (all optional):
  input    random | variable | constant   (default random)
           random: jax.random.uniform with a new key every step (the seed's leaking
           case); variable: random frames made once and reused; constant: jnp.zeros.
  lengths  fixed | new                    (default fixed)
           new: a new FFT length every step (512 + 2 * step): every new shape is a new
           XLA compilation, kept in JAX's caches (host memory grows per call).
  device   auto | cpu | gpu               (default auto: the first GPU JAX sees, else
           the CPU)

fw_bytes() is the device's ``memory_stats()["bytes_in_use"]`` where the backend has
allocator statistics (GPU), else None. info() says the device (``cuda:0`` or ``cpu:0``,
JAX's own name), its kind, the platform and JAX's version.
"""

import _params  # shared param parsing (stdlib only), next to this file

FRAMES_SHAPE = (144, 400)
FFT_LENGTH = 512

_PARAM_SPEC = {
    "input": ("random", ("random", "variable", "constant")),
    "lengths": ("fixed", ("fixed", "new")),
    "device": ("auto", ("auto", "cpu", "gpu")),
}


def _pick(jax, wanted):
    """The device to run on: JAX's first GPU unless the CPU is asked for."""
    if wanted != "cpu":
        try:
            gpus = jax.devices("gpu")
        except RuntimeError:    # no GPU backend in this jaxlib, or no GPU visible
            gpus = []
        if gpus:
            return gpus[0]
        if wanted == "gpu":
            raise RuntimeError("jax_rfft: device 'gpu' asked for, but JAX sees none (jax {}, "
                               "backend {}); use device: auto or cpu".format(
                                   jax.__version__, jax.default_backend()))
    return jax.devices("cpu")[0]


def setup(params):
    p = _params.parse("jax_rfft", params, _PARAM_SPEC)
    import jax
    import jax.numpy as jnp

    dev = _pick(jax, p["device"])
    key = jax.device_put(jax.random.PRNGKey(0), dev)
    frames = None
    if p["input"] == "variable":
        frames = jax.device_put(jax.random.uniform(key, FRAMES_SHAPE), dev)
    elif p["input"] == "constant":
        frames = jax.device_put(jnp.zeros(FRAMES_SHAPE, dtype=jnp.float32), dev)
    return {"jax": jax, "jnp": jnp, "p": p, "dev": dev, "key": key, "frames": frames,
            "steps": 0, "last_shape": None, "fw_api": None}


def step(state):
    jax = state["jax"]
    state["steps"] += 1
    with jax.default_device(state["dev"]):
        frames = state["frames"]
        if frames is None:
            frames = jax.random.uniform(jax.random.fold_in(state["key"], state["steps"]),
                                        FRAMES_SHAPE)
        n = FFT_LENGTH + 2 * state["steps"] if state["p"]["lengths"] == "new" else FFT_LENGTH
        spec = state["jnp"].fft.rfft(frames, n=n)
        spec.block_until_ready()
    state["last_shape"] = tuple(spec.shape)


def fw_bytes(state):
    stats_fn = getattr(state["dev"], "memory_stats", None)
    stats = stats_fn() if stats_fn is not None else None
    if not stats or "bytes_in_use" not in stats:
        return None
    state["fw_api"] = "memory_stats"
    return int(stats["bytes_in_use"])


def info(state):
    jax = state["jax"]
    dev = state["dev"]
    out = {"jax": jax.__version__, "device": str(dev), "device_kind": dev.device_kind,
           "platform": dev.platform, "params": dict(state["p"]), "steps": state["steps"],
           "spec_shape": list(state["last_shape"] or ()), "fw_bytes_api": state["fw_api"]}
    stats = dev.memory_stats() if hasattr(dev, "memory_stats") else None
    if stats and "peak_bytes_in_use" in stats:
        out["fw_peak_bytes"] = int(stats["peak_bytes_in_use"])
    return out
