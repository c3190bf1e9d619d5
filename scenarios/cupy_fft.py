"""cupy_fft: a CuPy FFT whose length cycles through a finite set (a GPU host's control for
a bounded cache under LRU eviction).

CuPy keeps cuFFT plans in a per-device LRU cache (16 plans by default). Cycling through
more lengths than that, every call misses, builds a plan and evicts the oldest: the cache
churns at its bound (a saw-tooth inside it) and memory holds. Cycling through fewer, it
fills and then every call hits. Clean either way.

Params (all optional):
  lengths  an int >= 1   (default 40: the distinct FFT lengths, 4096 + 16 * (step % lengths))
  cache    an int >= 1   (default 16: the plan cache's size, CuPy's own default)

fw_bytes() is CuPy's default memory pool's used bytes. info() says CuPy's version and the
plan cache's size.
"""

import _params  # shared param parsing (stdlib only), next to this file

_PARAM_SPEC = {"lengths": (40, ("int_strict", 1)), "cache": (16, ("int_strict", 1))}


def setup(params):
    p = _params.parse("cupy_fft", params, _PARAM_SPEC)
    import cupy

    cupy.fft.config.get_plan_cache().set_size(p["cache"])
    x = cupy.random.default_rng(0).random(4096 + 16 * p["lengths"], dtype=cupy.float32)
    return {"cupy": cupy, "p": p, "x": x, "steps": 0}


def step(s):
    n = 4096 + 16 * (s["steps"] % s["p"]["lengths"])
    s["steps"] += 1
    s["cupy"].fft.rfft(s["x"][:n])
    s["cupy"].cuda.Device().synchronize()


def fw_bytes(s):
    return int(s["cupy"].get_default_memory_pool().used_bytes())


def info(s):
    cache = s["cupy"].fft.config.get_plan_cache()
    return {"cupy": s["cupy"].__version__, "steps": s["steps"],
            "plan_cache": {"size": cache.get_curr_size(), "max_size": cache.get_size()}}
