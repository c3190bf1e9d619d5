"""The agent dies mid-write: a half JSON line lands in the output, then the process dies.

`how: exit` ends the process with os._exit; `how: kill` sends itself SIGKILL, which
the kernel ignores when the agent is PID 1 of a container without an init.
"""
import os
import signal
import sys


def setup(params):
    return {"n": 0, "at": int(params.get("at", 40)), "how": params.get("how", "exit")}


def step(state):
    state["n"] += 1
    if state["n"] == state["at"]:
        out = sys.argv[sys.argv.index("--out") + 1]
        with open(out, "a") as f:
            f.write('{"type":"sample","i":999,"src":"step","phase":"meas')
            f.flush()
        if state["how"] == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(9)
