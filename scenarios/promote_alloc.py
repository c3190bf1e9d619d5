"""promote_alloc: a float32 batch scaled by a NumPy float64 scalar; memory per unit follows NumPy.

NumPy 2 changed type promotion (NEP 50): ``float32_array * np.float64(s)`` was float32
under NumPy 1 (a scalar's value decided) and is float64 under NumPy 2 (its type decides).
A preprocessing step written that way holds twice the bytes per sample after an upgrade,
and the largest batch that fits a memory limit drops: the question `harness fit` answers
(on the TF CPU images, NumPy 1.23 vs 2.x, under a 512 MiB limit: 2.12.0 fits 15,
2.21.0 fits 10).

Params (all optional):
  batch   int >= 1, default 1       (units of `unit_mib` MiB of float32 input)
  unit_mib int >= 1, default 16     (input MiB per unit)
  hold    int >= 1, default 1       (scaled outputs kept alive at once)
"""

import _params  # shared param parsing (stdlib only), next to this file

_PARAM_SPEC = {
    "batch": (1, ("int", 1)),
    "unit_mib": (16, ("int", 1)),
    "hold": (1, ("int", 1)),
}


def setup(params):
    p = _params.parse("promote_alloc", params, _PARAM_SPEC)
    import numpy as np

    n = p["batch"] * p["unit_mib"] * (1 << 20) // 4
    x = np.ones(n, dtype=np.float32)
    return {"np": np, "x": x, "scale": np.float64(0.5), "held": [], "hold": p["hold"],
            "p": p}


def step(state):
    held = state["held"]
    if len(held) >= state["hold"]:
        # Dropped before the next one is made: the peak (input + `hold` outputs) is
        # what a sample after the step sees, not a transient between two samples.
        held.pop(0)
    held.append(state["x"] * state["scale"])   # float32 (NumPy 1) or float64 (NumPy 2)


def info(state):
    held = state["held"]
    return {"numpy": state["np"].__version__, "params": dict(state["p"]),
            "result_dtype": str(held[-1].dtype) if held else None,
            "bytes_per_unit": (state["x"].nbytes + (held[-1].nbytes if held else 0))
            // state["p"]["batch"]}


def teardown(state):
    state["held"] = []
    state.pop("x", None)
