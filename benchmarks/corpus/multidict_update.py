"""CIMultiDict.update() from a plain dict leaks in every multidict release before the
fix (the report traces it back to 5.2.0 at least): 1000 keys merged a call keep memory
behind. The earliest release with a wheel for this Python stands as the first bad.

Truth: benchmarks/corpuskit/truth.py multidict_update (3000 calls after 200 warm-up,
heap in use after gc.collect(), PYTHONMALLOC=malloc, tcache off).
"""

CASE = {
    "title": "multidict: CIMultiDict.update(dict) leaks (old leak, 5.x-6.3.x)",
    "kind": "leak",
    "link": "https://github.com/aio-libs/multidict/issues/1134",
    "package": "multidict",
    "versions": {"good": None, "bad": "6.0.4", "fixed": "6.4.0"},
    "extra": [],
    "params": {"keys": 1000},
    "truth": {
        "6.0.4": {"b_per_call": 35753.2, "b_per_call_2nd_half": 35731.4, "us_per_call": 621.23},
        "6.4.0": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 499.07},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py multidict_update: a plain loop in each "
        "release's venv, 200 warm-up calls, then 3000 calls; glibc heap in use "
        "(mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}


def setup(params):
    from multidict import CIMultiDict
    n = int(params.get("keys", 1000))
    return {"cls": CIMultiDict, "src": {f"X-Any-{i}": str(i) for i in range(n)}}


def step(state):
    result = state["cls"]()
    result.update(state["src"])
