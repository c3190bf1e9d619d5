"""multidict 6.3.0-6.3.2 leak a new `istr` each time a CIMultiDict copies keys into
another with add(): 10 headers copied a call keep their key objects. 6.2.0 is clean,
6.4.0 has the fix (PR 1133).

Truth: benchmarks/corpuskit/truth.py multidict_istr_add (3000 calls after 200 warm-up,
heap in use after gc.collect(), PYTHONMALLOC=malloc, tcache off).
"""

CASE = {
    "title": "multidict: CIMultiDict.add() of another's keys leaks istr objects",
    "kind": "leak",
    "link": "https://github.com/aio-libs/multidict/issues/1131",
    "package": "multidict",
    "versions": {"good": "6.2.0", "bad": "6.3.0", "fixed": "6.4.0"},
    "extra": [],
    "params": {},
    "truth": {
        "6.2.0": {"b_per_call": 1.1, "b_per_call_2nd_half": 0.1, "us_per_call": 3.07},
        "6.3.0": {"b_per_call": 640.3, "b_per_call_2nd_half": 640.0, "us_per_call": 3.44},
        "6.4.0": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 2.42},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py multidict_istr_add: a plain loop in each "
        "release's venv, 200 warm-up calls, then 3000 calls; glibc heap in use "
        "(mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}


def setup(params):
    from multidict import CIMultiDict
    return {"cls": CIMultiDict,
            "src": {f"X-Any-{i}": str(i) for i in range(10)}}


def step(state):
    result = state["cls"]()
    headers = state["cls"](state["src"])
    for key, value in headers.items():
        result.add(key, value)
