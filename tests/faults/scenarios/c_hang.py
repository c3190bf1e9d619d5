"""Hangs inside a C call with SIGTERM/SIGINT blocked: only SIGKILL ends it."""
import ctypes
import signal


def setup(params):
    return {"n": 0}


def step(state):
    state["n"] += 1
    if state["n"] == 5:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
        ctypes.CDLL(None).sleep(3600)
