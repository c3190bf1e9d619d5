"""A memo of computed results: `bounded: false` keeps every key it ever saw (a leak of
one entry per call, as a cache keyed by request id does); `bounded: true` is the same
memo behind functools.lru_cache(maxsize=128), which stays flat once full."""

import functools


def _render(key):
    return ("row %d: " % key) + "x" * 2048


def setup(params):
    state = {"i": 0, "bounded": bool(params.get("bounded", False)), "memo": {}}
    state["cached"] = functools.lru_cache(maxsize=128)(_render)
    return state


def step(state):
    state["i"] += 1
    key = state["i"]
    if state["bounded"]:
        return state["cached"](key % 256)
    if key not in state["memo"]:
        state["memo"][key] = _render(key)
    return state["memo"][key]
