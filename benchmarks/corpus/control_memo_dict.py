"""Control: a memo dict over a finite key space (600 keys, one a call in turn, each
value a small list): it grows for 600 calls, then every call is a hit. Truth "no leak":
heap flat after the fill.
"""

CASE = {
    "title": "control: memo dict over a finite key space (600 keys)",
    "kind": "control",
    "link": "https://docs.python.org/3/faq/programming.html#how-do-i-cache-method-calls",
    "package": None,
    "versions": {"good": "3.11"},
    "extra": [],
    "params": {},
    "truth": {
        "3.11": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 0.31},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_memo_dict --warmup 1200: a plain loop "
        "in each release's venv, 1200 warm-up calls, then 3000 calls; glibc heap in "
        "use (mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}


def setup(params):
    return {"memo": {}, "n": 0, "keys": int(params.get("keys", 600))}


def step(state):
    k = state["n"] % state["keys"]
    state["n"] += 1
    memo = state["memo"]
    if k not in memo:
        memo[k] = [str(k * i) for i in range(20)]
    return memo[k]
