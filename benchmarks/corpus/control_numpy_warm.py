"""Control: numpy warming up: the first calls of np.linalg and np.fft load and size their
internal buffers and caches (pocketfft's plan cache); each call does a 64x64 SVD and an
FFT of a length drawn in turn from 16 sizes. Truth "no leak" once warm.
"""

CASE = {
    "title": "control: numpy linalg/fft first calls (plan cache warming)",
    "kind": "control",
    "link": "https://numpy.org/doc/stable/reference/routines.fft.html",
    "package": "numpy",
    "versions": {"good": "1.26.4"},
    "extra": [],
    "params": {},
    "truth": {
        "1.26.4": {"b_per_call": 0.0, "b_per_call_2nd_half": 0.0, "us_per_call": 2756.11},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_numpy_warm --warmup 1200: a plain loop "
        "in each release's venv, 1200 warm-up calls, then 3000 calls; glibc heap in "
        "use (mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}


def setup(params):
    import numpy as np
    rng = np.random.default_rng(0)
    return {"np": np, "m": rng.standard_normal((64, 64)), "n": 0}


def step(state):
    np = state["np"]
    size = 256 + 32 * (state["n"] % 16)
    state["n"] += 1
    np.linalg.svd(state["m"])
    np.fft.rfft(np.ones(size))
