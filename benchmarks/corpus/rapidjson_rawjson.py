"""python-rapidjson's RawJSON() allocates its object before parsing its argument and
drops it without freeing it when the argument is rejected (not a str): one small
object (tens of bytes) per rejected call, below most tools' floor. Fixed in 1.24
(1.24 is not on the index here, 1.25 is); the constructor was the same for many
releases before 1.23, which stands as the first bad measured here.

Truth: benchmarks/corpuskit/truth.py rapidjson_rawjson (heap in use after
gc.collect(), PYTHONMALLOC=malloc, tcache off).
"""

import contextlib

CASE = {
    "title": "python-rapidjson: RawJSON() with a rejected argument leaks the object (tiny)",
    "kind": "leak",
    "link": "https://github.com/python-rapidjson/python-rapidjson/pull/239",
    "package": "python-rapidjson",
    "versions": {"good": None, "bad": "1.23", "fixed": "1.25"},
    "extra": [],
    "params": {},
    "truth": {
        "1.23": {"b_per_call": 32.9, "b_per_call_2nd_half": 32.5, "us_per_call": 1.26},
        "1.25": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 1.17},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py rapidjson_rawjson: a plain loop in each "
        "release's venv, 200 warm-up calls, then 3000 calls; glibc heap in use "
        "(mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}


def setup(params):
    import rapidjson
    return {"raw": rapidjson.RawJSON}


def step(state):
    with contextlib.suppress(TypeError):
        state["raw"](12345)
