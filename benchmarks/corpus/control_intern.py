"""Control: interned strings over a finite set: sys.intern of 2 names a call drawn in turn
from 1000 distinct names made fresh each call; the interpreter's table of interned
strings grows for 500 calls, then every intern is a lookup. Truth "no leak".
"""

CASE = {
    "title": "control: sys.intern over a finite set of 1000 names",
    "kind": "control",
    "link": "https://docs.python.org/3/library/sys.html#sys.intern",
    "package": None,
    "versions": {"good": "3.11"},
    "extra": [],
    "params": {},
    "truth": {
        "3.11": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 1.04},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_intern --warmup 1200: a plain loop in "
        "each release's venv, 1200 warm-up calls, then 3000 calls; glibc heap in use "
        "(mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}


def setup(params):
    import sys
    return {"intern": sys.intern, "n": 0, "kept": []}


def step(state):
    for _ in range(2):
        i = state["n"] % 1000
        state["n"] += 1
        name = "".join(["field_", str(i), "_", "x" * 24])
        state["intern"](name)
