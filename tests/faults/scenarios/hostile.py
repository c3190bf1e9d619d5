"""A malicious container: garbage, fake records and markup in its output, then a raise."""
import json
import sys

MARKUP = "<script>alert('pwned')</script><img src=x onerror=alert(1)>&amp;"


def setup(params):
    return {"n": 0, "flood": int(params.get("flood", 20000)),
            "big": int(params.get("big_mb", 8))}


def step(state):
    state["n"] += 1
    if state["n"] != 30:
        return
    out = sys.argv[sys.argv.index("--out") + 1]
    with open(out, "ab") as f:
        f.write(b"x" * (state["big"] << 20) + b"\n")                      # a monster line
        f.write(b'{"type":"sample","i":1,"src":"step"' + b"\xff\xfe" * 100 + b"}\n")
        f.write(b"this is not json at all\n")
        f.write(b'["a", "list"]\n')
        f.write(json.dumps({"type": "sample", "i": "one", "src": "step",
                            "phase": "measure"}).encode() + b"\n")
        f.write(json.dumps({"type": "sample", "i": 31, "src": "step", "phase": "measure",
                            "dt": ["fast"], "rss": -5}).encode() + b"\n")
        f.write(json.dumps({"type": "sample", "i": 32, "src": "timer", "phase": "measure",
                            "heap": 1e308 * 10}).encode() + b"\n")
        f.write(json.dumps({"type": "end", "status": "ok", "error": MARKUP,
                            "info": MARKUP}).encode() + b"\n")           # a fake end
        flood = json.dumps({"type": "sample", "i": 33, "src": "timer",
                            "phase": "flood"}).encode() + b"\n"
        f.write(flood * state["flood"])
    sys.stdout.write("y" * (4 << 20) + "\n" + MARKUP + "\n")
    sys.stdout.flush()
    raise RuntimeError("scenario says " + MARKUP)
