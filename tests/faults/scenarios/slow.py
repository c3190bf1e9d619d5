"""Flat memory, each step sleeps `sleep` seconds: a cell that is reliably mid-run."""
import time


def setup(params):
    return {"sleep": float(params.get("sleep", 0.01)), "buf": bytearray(1 << 16)}


def step(state):
    time.sleep(state["sleep"])
