"""Control, saw-tooth: a cachetools.TTLCache (ttl=4 ticks) behind @cachetools.cached, whose
timer is the call count // 150 (a deterministic clock: one tick every 150 calls). A new
key every call stores a ~2.9 KB blob; items expire a whole tick at a time, and the cache
drops them at the next insert: the heap rises at ~3.6 KiB/call for 600 calls (400 past
harness's 200-call warm-up), then every 150 calls falls by the 150 expired blobs and
climbs back: a bounded saw-tooth between ~450 and ~600 live entries. Truth "no leak":
bounded (+6 B/call over 3000 calls after a 1200-call warm-up, 0.5 B/call in their second
half: whole 150-call periods). With a 200-call warm-up: ~1.3 MiB more by call ~600 (~3.4
KiB/call), then the saw-tooth in a ~0.45 MiB band.
"""

CASE = {
    "title": "control: cachetools TTLCache expiring in batches (tick clock)",
    "kind": "control",
    "link": "https://cachetools.readthedocs.io/en/stable/#cachetools.TTLCache",
    "package": "cachetools",
    "versions": {"good": "5.5.0"},
    "extra": [],
    "params": {},
    "truth": {
        "5.5.0": {"b_per_call": 6.38, "b_per_call_2nd_half": 0.47, "us_per_call": 8.47},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_cachetools_ttl_sawtooth --warmup 1200 "
        "--calls 3000: a plain loop in the release's venv, 1200 warm-up calls (past the "
        "fill), then 3000 calls; glibc heap in use (mallinfo2) after gc.collect() "
        "before, at the half and after, PYTHONMALLOC=malloc, tcache off; median time "
        "per call (a 2-core machine under load). The fill: truth.py "
        "control_cachetools_ttl_sawtooth --warmup 200 --calls 3000 gave 394.11 B/call "
        "(0.28 B/call in the second half); its shape from heap samples every 25 calls "
        "of the same loop"
    ),
    "batch": "49",
}


def setup(params):
    import cachetools
    state = {"n": 0}
    cache = cachetools.TTLCache(maxsize=100_000, ttl=4, timer=lambda: state["n"] // 150)

    @cachetools.cached(cache)
    def render(k):
        return (f"row {k}: " + "x" * 40 + "\n").encode() * 60

    state["render"] = render
    return state


def step(state):
    state["render"](state["n"])
    state["n"] += 1
