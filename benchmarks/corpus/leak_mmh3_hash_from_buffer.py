"""mmh3's `hash_from_buffer()` never releases the buffer it takes from its argument:
it parses the key with the "s*" format (which fills a `Py_buffer` and holds a
reference to the object) and returns without `PyBuffer_Release()`, so every object
hashed through it is kept alive for good. The fix came with PR 75 ("Add funcs for
non-immutables w/o copying"), first released in 5.0.0, whose changelog lists "Fix a
reference leak in the hash_from_buffer() function".

The missing release is as old as the function (2.5, 2017), so every mmh3 with a CPython
3.11 wheel before 5.0.0 has it and there is no good release on 3.11; the pair is bad
and fixed only, as leak_greenlet_switch_py311 is, with the bad release the first
that installs as a 3.11 wheel (3.1.0).

The scenario hashes a fresh 16-byte bytes object per call (as hashing data just read
from a socket or file would); what leaks per call is that object, 49 bytes (64 with
malloc's header).

Truth: benchmarks/corpuskit/truth.py leak_mmh3_hash_from_buffer --calls 20000 (20000
calls after 200 warm-up, heap in use after gc.collect(), PYTHONMALLOC=malloc, tcache
off).
It measured 64.0 B/call in 3.1.0 (the same in the second half, RSS +63 B/call) and 0.0
in 5.0.0.
"""

CASE = {
    "title": "mmh3: hash_from_buffer keeps every buffer it hashes (<5.0.0)",
    "kind": "leak",
    "link": "https://github.com/hajimes/mmh3/pull/75",
    "package": "mmh3",
    "versions": {"good": None, "bad": "3.1.0", "fixed": "5.0.0"},
    "extra": [],
    "params": {"size": 16},
    "truth": {
        "3.1.0": {"b_per_call": 64.0, "b_per_call_2nd_half": 64.0, "us_per_call": 0.44},
        "5.0.0": {"b_per_call": 0.0, "b_per_call_2nd_half": 0.0, "us_per_call": 0.44},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_mmh3_hash_from_buffer --calls 20000: a plain "
        "loop in each release's venv, 200 warm-up calls, then 20000 calls; glibc heap "
        "in use (mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
    "batch": "49",
}


def setup(params):
    import mmh3

    return {"hash": mmh3.hash_from_buffer, "size": int(params.get("size", 16))}


def step(state):
    return state["hash"](bytes(state["size"]))
