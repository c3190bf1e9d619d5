"""Control, saw-tooth: numexpr's compiled-expression cache (necompiler._numexpr_cache, a
CacheDict of 256 entries that, once over its bound, deletes the oldest 10% = 25 at
once). A new expression every second call (the call between evaluates it again from the
cache): the heap rises at ~13 KiB/call for ~515 calls (315 past harness's 200-call
warm-up), then drops 25 programs every 50 calls and refills them: a bounded saw-tooth.
Truth "no leak": bounded (+1.6 B/call over 3000 calls after a 1200-call warm-up). With a
200-call warm-up: ~3.7 MiB more by call ~520 (~12-13 KiB/call), then the saw-tooth (~0.3
MiB band).
"""

CASE = {
    "title": "control: numexpr expression cache (256, evicts 10% at once)",
    "kind": "control",
    "link": "https://github.com/pydata/numexpr/blob/master/numexpr/utils.py",
    "package": "numexpr",
    "versions": {"good": "2.10.1"},
    "extra": ["numpy==1.26.4"],
    "params": {},
    "truth": {
        "2.10.1": {"b_per_call": 1.57, "b_per_call_2nd_half": -0.53, "us_per_call": 334.3},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_numexpr_cache_sawtooth --warmup 1200 "
        "--calls 3000: a plain loop in the release's venv, 1200 warm-up calls (past the "
        "fill), then 3000 calls; glibc heap in use (mallinfo2) after gc.collect() "
        "before, at the half and after, PYTHONMALLOC=malloc, tcache off; median time "
        "per call (a 2-core machine under load). The fill: truth.py "
        "control_numexpr_cache_sawtooth --warmup 200 --calls 3000 gave 1337.57 B/call "
        "(3.36 B/call in the second half); its shape from heap samples every 25 calls "
        "of the same loop"
    ),
    "batch": "49",
}


def setup(params):
    import numexpr
    import numpy as np
    numexpr.set_num_threads(1)
    return {"ne": numexpr, "vars": {"a": np.arange(16.0), "b": np.ones(16)}, "n": 0}


def step(state):
    k = state["n"] // 2         # a new expression every second call
    state["n"] += 1
    state["ne"].evaluate(f"a * {k} + b * {k % 7} - {k}.5", local_dict=state["vars"])
