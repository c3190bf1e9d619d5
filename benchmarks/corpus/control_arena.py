"""Control: an allocator pool at work: each call makes 5,000 small objects (tuples,
dicts, floats) and a bytearray grown to 256 KiB by appends, then drops them all. The
allocator's arenas and free lists stay warm between calls; nothing is kept. Truth "no
leak".
"""

CASE = {
    "title": "control: arenas and allocator pools (many small objects made and freed)",
    "kind": "control",
    "link": "https://docs.python.org/3/c-api/memory.html#the-pymalloc-allocator",
    "package": None,
    "versions": {"good": "3.11"},
    "extra": [],
    "params": {},
    "truth": {
        "3.11": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 2383.09},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_arena --warmup 1200: a plain loop in "
        "each release's venv, 1200 warm-up calls, then 3000 calls; glibc heap in use "
        "(mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}


def setup(params):
    return {"n": int(params.get("objects", 5000))}


def step(state):
    objs = [(i, {"v": float(i)}) for i in range(state["n"])]
    buf = bytearray()
    chunk = b"x" * 4096
    while len(buf) < 1 << 18:
        buf += chunk
    del objs, buf
