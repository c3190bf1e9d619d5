"""Control: the stdlib json round-trip of a 20-key dict (the clean control of
benchmarks/vs_psleak.py). Truth "no leak".
"""

CASE = {
    "title": "control: stdlib json round-trip",
    "kind": "control",
    "link": "https://docs.python.org/3/library/json.html",
    "package": None,
    "versions": {"good": "3.11"},
    "extra": [],
    "params": {},
    "truth": {
        "3.11": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 20.66},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_json --warmup 1200: a plain loop in "
        "each release's venv, 1200 warm-up calls, then 3000 calls; glibc heap in use "
        "(mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}


def setup(params):
    import json
    return {"json": json}


def step(state):
    j = state["json"]
    j.loads(j.dumps({f"k{i}": [i, str(i)] for i in range(20)}))
