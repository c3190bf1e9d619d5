"""Deliberately leaks `bytes` per step (default 16 KiB) by keeping every buffer."""


def setup(params):
    return {"keep": [], "size": int(params.get("bytes", 16384))}


def step(state):
    state["keep"].append(bytearray(state["size"]))
