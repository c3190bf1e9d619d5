"""propcache 0.4.0's C `cached_property` (and `under_cached_property`, which yarl's URL
uses) takes one reference too many to the value it returns: on a first access the
freshly computed value is stored in the instance's `__dict__` and returned with an
extra reference that nobody drops, so the value outlives its instance; on a cached
access the value gains a reference per read. 0.3.2 did not have the extra
`Py_INCREF`; 0.4.1 removes it (PR 162). 0.4.0 was yanked from the index for this
("ref leak", issue 159); pinned exactly it still installs.

The scenario builds an object with a cached property, reads it twice, drops it: the
property's value (a small dict) is what leaks.

Truth: benchmarks/corpuskit/truth.py leak_propcache_cached_property (3000 calls after
200 warm-up, heap in use after gc.collect(), PYTHONMALLOC=malloc, tcache off).
"""

CASE = {
    "title": "propcache: cached_property keeps every computed value (0.4.0, yanked)",
    "kind": "leak",
    "link": "https://github.com/aio-libs/propcache/issues/159",
    "package": "propcache",
    "versions": {"good": "0.3.2", "bad": "0.4.0", "fixed": "0.4.1"},
    "extra": [],
    "params": {},
    "truth": {
        "0.3.2": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 0.67},
        "0.4.0": {"b_per_call": 287.5, "b_per_call_2nd_half": 288.1, "us_per_call": 1.14},
        "0.4.1": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 0.69},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_propcache_cached_property: a plain loop in "
        "each release's venv, 200 warm-up calls, then 3000 calls; glibc heap in use "
        "(mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}


def setup(params):
    from propcache.api import cached_property

    class Record:
        def __init__(self, n):
            self.n = n

        @cached_property
        def summary(self):
            return {"n": self.n, "half": self.n / 2}

    return {"cls": Record, "i": 0}


def step(state):
    state["i"] += 1
    rec = state["cls"](state["i"])
    return rec.summary is rec.summary   # computed, then read from the cache
