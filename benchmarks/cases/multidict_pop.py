"""multidict MultiDict.pop of 100 fresh keys per step.

Leaks ~6 KB per step in multidict 6.5.0 ... 6.6.3 (aio-libs/multidict#1232), fixed in
6.6.4 (PR #1233). Measured: 5984 heap B/step on 6.6.3, 0 on 6.6.4.
"""


def setup(params):
    from multidict import MultiDict
    keys = [f"X-Any-{i}" for i in range(int(params.get("keys", 100)))]
    return {"cls": MultiDict, "keys": keys}


def step(state):
    keys = state["keys"]
    md = state["cls"]({k: "v" for k in keys})
    for k in keys:
        md.pop(k)
