"""Hangs inside a blocking call on the 5th step."""
import time


def setup(params):
    return {"n": 0}


def step(state):
    state["n"] += 1
    if state["n"] == 5:
        time.sleep(3600)
