"""Allocates and frees the same buffer each step: memory stays flat."""


def setup(params):
    return {"size": int(params.get("bytes", 65536))}


def step(state):
    buf = bytearray(state["size"])
    buf[0] = 1
