"""Control: a warming framework: the re module's compile cache (512 entries in 3.11)
fed 400 distinct patterns in turn, one compile and match a call: compiled patterns pile
up for 400 calls (past harness's warm-up), then every compile is a cache hit. Truth
"no leak".
"""

CASE = {
    "title": "control: re compile cache warming up (400 patterns)",
    "kind": "control",
    "link": "https://docs.python.org/3/library/re.html#re.compile",
    "package": None,
    "versions": {"good": "3.11"},
    "extra": [],
    "params": {},
    "truth": {
        "3.11": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 2.21},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_re_cache --warmup 1200: a plain loop "
        "in each release's venv, 1200 warm-up calls, then 3000 calls; glibc heap in "
        "use (mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}


def setup(params):
    import re
    return {"re": re, "n": 0, "count": int(params.get("patterns", 400))}


def step(state):
    i = state["n"] % state["count"]
    state["n"] += 1
    pat = state["re"].compile(rf"(?P<k{i}>[a-z]+)_{i}\s*=\s*(\d+)")
    pat.match(f"abc_{i} = 42")
