"""jax_shapes: one jitted function called on arrays whose length cycles through a finite
set (a GPU host's control for a cache of compiled objects).

JAX compiles a jitted function once per input shape and keeps the executable in its
compilation cache. Called on lengths 1024 + 8 * (step % shapes), the cache fills for
`shapes` calls (each call a compile: host memory grows tens of KiB per call) and then
holds: every later call hits it. Clean: the growth stops when the set is exhausted.

Params (all optional):
  shapes  an int >= 1   (default 150: the distinct lengths cycled through)

fw_bytes() is the device's ``bytes_in_use`` (JAX preallocates the device, so NVML stays
flat). info() says JAX's version, the device and how many distinct shapes were seen.
"""

import _params  # shared param parsing (stdlib only), next to this file

_PARAM_SPEC = {"shapes": (150, ("int_strict", 1))}


def setup(params):
    p = _params.parse("jax_shapes", params, _PARAM_SPEC)
    import jax
    import jax.numpy as jnp

    @jax.jit
    def f(x):
        return jnp.sum(jnp.sin(x) * jnp.cos(x))

    return {"jax": jax, "jnp": jnp, "f": f, "p": p, "dev": jax.devices()[0], "steps": 0}


def step(s):
    n = 1024 + 8 * (s["steps"] % s["p"]["shapes"])
    s["steps"] += 1
    s["f"](s["jnp"].ones((n,), dtype=s["jnp"].float32)).block_until_ready()


def fw_bytes(s):
    stats = s["dev"].memory_stats() or {}
    return int(stats.get("bytes_in_use", 0))


def info(s):
    return {"jax": s["jax"].__version__, "device": str(s["dev"]), "steps": s["steps"],
            "shapes": min(s["steps"], s["p"]["shapes"])}
