"""Raises on the 3rd step with a recognisable message."""


def setup(params):
    return {"n": 0}


def step(state):
    state["n"] += 1
    if state["n"] == 3:
        raise RuntimeError("scenario exploded on purpose")
