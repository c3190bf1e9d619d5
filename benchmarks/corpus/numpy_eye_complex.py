"""numpy 2.4.0 leaks the flat iterator it makes when assigning through `.flat` (the
path np.eye takes for a complex dtype): about 2.6 KB per 10x10 complex identity.
2.3.5 is clean; 2.4.1 carries the fix.

Truth: benchmarks/corpuskit/truth.py numpy_eye_complex (heap in use after gc.collect(),
PYTHONMALLOC=malloc, tcache off).
"""

CASE = {
    "title": "numpy: np.eye(complex) leaks its flat iterator (2.4.0)",
    "kind": "leak",
    "link": "https://github.com/numpy/numpy/issues/30508",
    "package": "numpy",
    "versions": {"good": "2.3.5", "bad": "2.4.0", "fixed": "2.4.1"},
    "extra": [],
    "params": {},
    "truth": {
        "2.3.5": {"b_per_call": -0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 1.49},
        "2.4.0": {"b_per_call": 2786.8, "b_per_call_2nd_half": 2786.7, "us_per_call": 3.6},
        "2.4.1": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 1.5},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py numpy_eye_complex: a plain loop in each "
        "release's venv, 200 warm-up calls, then 3000 calls; glibc heap in use "
        "(mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}


def setup(params):
    import numpy
    return {"np": numpy}


def step(state):
    np = state["np"]
    np.eye(10, dtype=np.complex128)
