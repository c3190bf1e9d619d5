"""Forks a child that allocates `mb` MiB, touches every page and sleeps; the parent steps.

The child's memory is in the container's cgroup, not in the agent's RSS.
"""
import os
import time


def setup(params):
    mb = int(params.get("mb", 200))
    pid = os.fork()
    if pid == 0:
        try:
            block = bytearray(mb * 1024 * 1024)
            for i in range(0, len(block), 4096):
                block[i] = 1
            pidfile = params.get("pidfile")
            if pidfile:
                with open(pidfile, "w") as f:
                    f.write(str(os.getpid()))
            time.sleep(float(params.get("child_sleep", 600)))
        finally:
            os._exit(0)
    return {"child": pid, "sleep": float(params.get("sleep", 0.01))}


def step(state):
    time.sleep(state["sleep"])
