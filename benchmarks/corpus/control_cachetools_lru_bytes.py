"""Control: a cachetools.LRUCache bounded in bytes (maxsize 4 MiB, getsizeof=len) behind
@cachetools.cached, fed a new key every call whose value is a ~4.9 KB rendered blob. It
fills for ~850 calls (650 past harness's 200-call warm-up) at ~5.7 KiB/call, then evicts
the least recently used blob for each new one: flat. Truth "no leak": heap flat once the
4 MiB are full (+0.8 B/call after a 2000-call warm-up). With a 200-call warm-up: ~3.7
MiB more by call ~850 (5.5 KiB/call), then flat (1.3 KiB/call averaged over 3000 calls,
0.6 B/call in their second half).
"""

CASE = {
    "title": "control: cachetools LRUCache bounded at 4 MiB of values",
    "kind": "control",
    "link": "https://cachetools.readthedocs.io/en/stable/#cachetools.LRUCache",
    "package": "cachetools",
    "versions": {"good": "5.5.0"},
    "extra": [],
    "params": {},
    "truth": {
        "5.5.0": {"b_per_call": 0.84, "b_per_call_2nd_half": 1.0, "us_per_call": 9.11},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_cachetools_lru_bytes --warmup 2000 "
        "--calls 3000: a plain loop in the release's venv, 2000 warm-up calls (past the "
        "fill), then 3000 calls; glibc heap in use (mallinfo2) after gc.collect() "
        "before, at the half and after, PYTHONMALLOC=malloc, tcache off; median time "
        "per call (a 2-core machine under load). The fill: truth.py "
        "control_cachetools_lru_bytes --warmup 200 --calls 3000 gave 1257.79 B/call "
        "(0.59 B/call in the second half); its shape from heap samples every 25 calls "
        "of the same loop"
    ),
    "batch": "49",
}


def setup(params):
    import cachetools
    cache = cachetools.LRUCache(maxsize=int(params.get("bytes", 4 << 20)), getsizeof=len)

    @cachetools.cached(cache)
    def render(k):
        return (f"row {k}: " + "x" * 40 + "\n").encode() * 100

    return {"render": render, "n": 0}


def step(state):
    state["render"](state["n"])
    state["n"] += 1
