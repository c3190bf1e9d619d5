"""numpy.nested_iters leaks the iterators it has already built when it fails on bad
arguments (axes that do not exist for the operands): each failed call keeps a small
block, about 160 B. The fix went into 1.23.4 (backport of PR 22296); the leak is older
than the first release with a wheel for this Python (1.23.2), which stands as the
first bad.

Truth: benchmarks/corpuskit/truth.py numpy_nested_iters (heap in use after
gc.collect(), PYTHONMALLOC=malloc, tcache off).
"""

import contextlib

CASE = {
    "title": "numpy: nested_iters leaks on an error (small leak)",
    "kind": "leak",
    "link": "https://github.com/numpy/numpy/issues/19400",
    "package": "numpy",
    "versions": {"good": None, "bad": "1.23.2", "fixed": "1.23.4"},
    "extra": [],
    "params": {},
    "truth": {
        "1.23.2": {"b_per_call": 176.1, "b_per_call_2nd_half": 176.1, "us_per_call": 2.58},
        "1.23.4": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 2.54},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py numpy_nested_iters: a plain loop in each "
        "release's venv, 200 warm-up calls, then 3000 calls; glibc heap in use "
        "(mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}


def setup(params):
    import numpy
    return {"np": numpy}


def step(state):
    with contextlib.suppress(Exception):
        state["np"].nested_iters(["e", "f"], [[1], [2]])
