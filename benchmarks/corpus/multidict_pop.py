"""multidict's C extension, from 6.5.0 to 6.6.3, does not free the storage of the entries
that MultiDict.pop() removes: a dict of 100 fresh keys popped empty keeps about 6 KB a
call. 6.4.4 and 6.6.4 (the fix) keep nothing.

Truth: benchmarks/corpuskit/truth.py multidict_pop (3000 calls after 200 warm-up, heap
in use after gc.collect(), PYTHONMALLOC=malloc, tcache off).
"""

CASE = {
    "title": "multidict: MultiDict.pop() keeps the removed entries",
    "kind": "leak",
    "link": "https://github.com/aio-libs/multidict/issues/1232",
    "package": "multidict",
    "versions": {"good": "6.4.4", "bad": "6.5.0", "fixed": "6.6.4"},
    "extra": [],
    "params": {},
    "truth": {
        "6.4.4": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 9.23},
        "6.5.0": {"b_per_call": 5984.1, "b_per_call_2nd_half": 5984.0, "us_per_call": 12.16},
        "6.6.4": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 7.93},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py multidict_pop: a plain loop in each release's "
        "venv, 200 warm-up calls, then 3000 calls; glibc heap in use (mallinfo2) "
        "after gc.collect() before, at the half and after, PYTHONMALLOC=malloc, "
        "tcache off; median time per call"
    ),
}


def setup(params):
    from multidict import MultiDict
    n = int(params.get("keys", 100))
    return {"cls": MultiDict, "keys": [f"X-Any-{i}" for i in range(n)]}


def step(state):
    md = state["cls"]({k: "v" for k in state["keys"]})
    for k in state["keys"]:
        md.pop(k)
