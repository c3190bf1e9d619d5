"""Control: array.array and bytearray resize patterns: an array of doubles grown by
extend to 64k items and shrunk by slicing back to 1k, a bytearray doubled and truncated,
each call; the realloc'd blocks are reused. Truth "no leak".
"""

CASE = {
    "title": "control: array/bytearray grow-and-shrink (realloc reuse)",
    "kind": "control",
    "link": "https://docs.python.org/3/library/array.html",
    "package": None,
    "versions": {"good": "3.11"},
    "extra": [],
    "params": {},
    "truth": {
        "3.11": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 302.74},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_array_resize --warmup 1200: a plain "
        "loop in each release's venv, 1200 warm-up calls, then 3000 calls; glibc heap "
        "in use (mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}


def setup(params):
    import array
    return {"a": array.array("d", range(1024)), "b": bytearray(1024)}


def step(state):
    a, b = state["a"], state["b"]
    for _ in range(6):
        a.extend(a)
        b.extend(b)
    del a[1024:]
    del b[1024:]
