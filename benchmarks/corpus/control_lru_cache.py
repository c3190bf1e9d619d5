"""Control: a functools.lru_cache(maxsize=4096) fed 4 new keys a call fills for its first
1024 calls (past harness's 200-call warm-up), then evicts one entry per new one: memory
rises and stops. Truth "no leak": heap flat once full (the truth loop's warm-up covers
the fill: 1200 calls).
"""

CASE = {
    "title": "control: functools.lru_cache filling to maxsize, then steady",
    "kind": "control",
    "link": "https://docs.python.org/3/library/functools.html#functools.lru_cache",
    "package": None,
    "versions": {"good": "3.11"},
    "extra": [],
    "params": {},
    "truth": {
        "3.11": {"b_per_call": 49.3, "b_per_call_2nd_half": 0.0, "us_per_call": 1.45},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_lru_cache --warmup 1200: a plain loop "
        "in each release's venv, 1200 warm-up calls, then 3000 calls; glibc heap in "
        "use (mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}


def setup(params):
    import functools

    @functools.lru_cache(maxsize=4096)
    def square(n):
        return [n] * 8

    return {"f": square, "n": 0}


def step(state):
    for _ in range(4):
        state["n"] += 1
        state["f"](state["n"])
