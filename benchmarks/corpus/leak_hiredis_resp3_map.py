"""hiredis-py's `Reader` leaks on every RESP3 map reply it parses: `tryParentize()`
in `src/reader.c` stores a map's key with `PyDict_SetItem(parent, obj, Py_None)`,
then pops it back with `popitem` and stores the value, and drops none of the new
references it holds (the key object, the popped `(key, None)` tuple, the value).
Issue 175 reported it; PR 204 ("Fix memory leak in RESP3 map parsing") releases
them, first in 3.1.1 (3.2.0 has it too).

RESP3 maps have leaked this way since they were first parsed (2.0.0, which has no
CPython 3.11 wheel), so there is no good release on 3.11; the pair is bad and fixed
only, as leak_greenlet_switch_py311 is, with the bad release the first that
installs as a 3.11 wheel (2.1.0).

The scenario feeds a one-entry map reply (`%1`, key `+key`, value `:1`) and reads
it back with `gets()`; what leaks per call is the key (a 3-byte bytes object) and
the popped tuple, 112 bytes with malloc's headers (the value 1 is a cached small
int).

Truth: benchmarks/corpuskit/truth.py leak_hiredis_resp3_map --calls 20000 (20000
calls after 200 warm-up, heap in use after gc.collect(), PYTHONMALLOC=malloc, tcache
off).
It measured 118.0 B/call in 2.1.0 (112.2 in the second half, RSS +124 B/call) and 0.0
in 3.1.1.
"""

CASE = {
    "title": "hiredis: Reader.gets() leaks the key and a tuple per RESP3 map (<3.1.1)",
    "kind": "leak",
    "link": "https://github.com/redis/hiredis-py/pull/204",
    "package": "hiredis",
    "versions": {"good": None, "bad": "2.1.0", "fixed": "3.1.1"},
    "extra": [],
    "params": {"reply": "%1\r\n+key\r\n:1\r\n"},
    "truth": {
        "2.1.0": {"b_per_call": 118.0, "b_per_call_2nd_half": 112.2, "us_per_call": 2.11},
        "3.1.1": {"b_per_call": 0.0, "b_per_call_2nd_half": 0.0, "us_per_call": 2.15},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_hiredis_resp3_map --calls 20000: a plain "
        "loop in each release's venv, 200 warm-up calls, then 20000 calls; glibc heap "
        "in use (mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
    "batch": "49",
}


def setup(params):
    import hiredis

    reply = params.get("reply", "%1\r\n+key\r\n:1\r\n").encode()
    return {"reader": hiredis.Reader(), "reply": reply}


def step(state):
    reader = state["reader"]
    reader.feed(state["reply"])
    return reader.gets()
