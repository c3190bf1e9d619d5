"""Control, saw-tooth: the `regex` package's compile cache (regex._cache, _MAXCACHE = 500)
fed a new pattern every call. Once it holds 500 compiled patterns, _shrink_cache throws
out 100 of them at random before the next is stored, so the cache goes back and forth
between 400 and 500 entries. The heap rises at ~6.3 KiB/call for the first 500 calls
(300 past harness's 200-call warm-up), then saw-tooths in a ~620 KiB band with a period
of 100 calls. Truth "no leak": bounded (+1.9 B/call over 3000 calls after a 5000-call
warm-up). With a 200-call warm-up: ~6.3 KiB/call to call 500, then the saw-tooth (~0.65
MiB band) on a baseline that still creeps up (~1 KiB/call falling to nothing by call
~4000; ~2.7 MiB in all): 1.05 KiB/call averaged over 3000 calls, 175 B/call in their
second half.
"""

CASE = {
    "title": "control: regex module compile cache (500, shrinks by 100 at random)",
    "kind": "control",
    "link": "https://github.com/mrabarnett/mrab-regex/blob/hg/regex_3/regex.py",
    "package": "regex",
    "versions": {"good": "2024.11.6"},
    "extra": [],
    "params": {},
    "truth": {
        "2024.11.6": {"b_per_call": 1.87, "b_per_call_2nd_half": 0.0, "us_per_call": 356.55},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_regex_cache_sawtooth --warmup 5000 "
        "--calls 3000: a plain loop in the release's venv, 5000 warm-up calls (past the "
        "fill), then 3000 calls; glibc heap in use (mallinfo2) after gc.collect() "
        "before, at the half and after, PYTHONMALLOC=malloc, tcache off; median time "
        "per call (a 2-core machine under load). The fill: truth.py "
        "control_regex_cache_sawtooth --warmup 200 --calls 3000 gave 1050.13 B/call "
        "(175.42 B/call in the second half); its shape from heap samples every 25 calls "
        "of the same loop"
    ),
    "batch": "49",
}


def setup(params):
    import regex
    return {"regex": regex, "n": 0}


def step(state):
    i = state["n"]
    state["n"] += 1
    pat = state["regex"].compile(rf"(?P<k{i}>\p{{L}}+)_{i}\s*=\s*(\d+)")
    pat.match(f"abc_{i} = 42")
