"""msgpack's C unpacker leaks the partly built containers when it fails inside a
nested array or map: on an error `unpack_clear()` released only the bottom of its
container stack (`stack[0]`), never the containers opened above it, so
`unpackb(b"\\x91\\x91\\xc1")` (an array holding an array holding the reserved byte
0xc1) raises FormatError and keeps the inner list. Issue/PR 671 ("fix: avoid memory
leak when decoding invalid nested arrays") walks the whole stack and is first
released in 1.2.0.

The cleanup has released only `stack[0]` since long before the first msgpack with a
CPython 3.11 wheel (1.0.5), so there is no good release on 3.11; the pair is bad and
fixed only, as leak_greenlet_switch_py311 is, with the bad release the first that
installs as a 3.11 wheel.

The scenario unpacks that three-byte message and catches the error; what leaks per
call is the inner one-item list, about 100 bytes.

Truth: benchmarks/corpuskit/truth.py leak_msgpack_unpackb_nested_error --calls 20000
(20000 calls after 200 warm-up, heap in use after gc.collect(), PYTHONMALLOC=malloc,
tcache off).
It measured 98.3 B/call in 1.0.5 (98.2 in the second half, RSS +86 B/call) and 0.0 in
1.2.0.
"""

CASE = {
    "title": "msgpack: unpackb keeps nested containers when decoding fails (<1.2.0)",
    "kind": "leak",
    "link": "https://github.com/msgpack/msgpack-python/pull/671",
    "package": "msgpack",
    "versions": {"good": None, "bad": "1.0.5", "fixed": "1.2.0"},
    "extra": [],
    "params": {"data_hex": "9191c1"},
    "truth": {
        "1.0.5": {"b_per_call": 98.3, "b_per_call_2nd_half": 98.2, "us_per_call": 1.14},
        "1.2.0": {"b_per_call": 0.0, "b_per_call_2nd_half": 0.0, "us_per_call": 1.0},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_msgpack_unpackb_nested_error --calls 20000: "
        "a plain loop in each release's venv, 200 warm-up calls, then 20000 calls; "
        "glibc heap in use (mallinfo2) after gc.collect() before, at the half and "
        "after, PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
    "batch": "49",
}


def setup(params):
    import msgpack

    assert msgpack.unpackb.__module__ != "msgpack.fallback", "the leak is in the C unpacker"
    return {"unpackb": msgpack.unpackb,
            "data": bytes.fromhex(params.get("data_hex", "9191c1"))}


def step(state):
    try:  # noqa: SIM105  (the plain loop the report would write)
        state["unpackb"](state["data"])
    except ValueError:  # FormatError, msgpack's UnpackValueError
        pass
