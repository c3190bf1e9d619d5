"""multidict 6.3.0 leaks when a CIMultiDict is built from a dict and read back: the
case-folded key made for each entry is never released (aiohttp's client builds such
a dict on every request). 6.2.0 is clean; the 6.3.x fixes came in 6.3.1-6.4.0.

Truth: benchmarks/corpuskit/truth.py multidict_cimultidict_get (3000 calls after 200
warm-up, heap in use after gc.collect(), PYTHONMALLOC=malloc, tcache off).
"""

CASE = {
    "title": "multidict: CIMultiDict({...}).get() leaks its case-folded keys (6.3.0)",
    "kind": "leak",
    "link": "https://github.com/aio-libs/multidict/issues/1117",
    "package": "multidict",
    "versions": {"good": "6.2.0", "bad": "6.3.0", "fixed": "6.4.0"},
    "extra": [],
    "params": {},
    "truth": {
        "6.2.0": {"b_per_call": 1.4, "b_per_call_2nd_half": 0.8, "us_per_call": 0.89},
        "6.3.0": {"b_per_call": 208.3, "b_per_call_2nd_half": 208.1, "us_per_call": 0.59},
        "6.4.0": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 0.56},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py multidict_cimultidict_get: a plain loop in "
        "each release's venv, 200 warm-up calls, then 3000 calls; glibc heap in use "
        "(mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}


def setup(params):
    from multidict import CIMultiDict
    return {"cls": CIMultiDict}


def step(state):
    headers = state["cls"]({"User-Agent": "test"})
    headers.get("User-Agent")
