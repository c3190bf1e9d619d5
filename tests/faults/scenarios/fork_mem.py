"""Forks a child that allocates `mb` MiB, touches every page and sleeps; the parent steps
once the child has touched them (its memory is then the same through the run).

The child's memory is in the container's cgroup, not in the agent's RSS.
"""
import os
import time


def setup(params):
    mb = int(params.get("mb", 200))
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(ready_r)
            block = bytearray(mb * 1024 * 1024)
            for i in range(0, len(block), 4096):
                block[i] = 1
            os.write(ready_w, b"1")     # every page touched: the parent steps from here
            pidfile = params.get("pidfile")
            if pidfile:
                with open(pidfile, "w") as f:
                    f.write(str(os.getpid()))
            time.sleep(float(params.get("child_sleep", 600)))
        finally:
            os._exit(0)
    os.close(ready_w)
    os.read(ready_r, 1)   # the child's memory stays as it is while the steps are measured
    os.close(ready_r)
    return {"child": pid, "sleep": float(params.get("sleep", 0.01))}


def step(state):
    time.sleep(state["sleep"])
