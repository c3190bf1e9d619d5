"""simplejson's C encoder leaks the id it keys its circular-reference markers by when the
recursion limit stops it at a `default=` hook: `encoder_listencode_obj()` makes `ident`
(`PyLong_FromVoidPtr(obj)`) and stores it in the markers, then returns on a failed
`Py_EnterRecursiveCall()` without releasing it. Issue 349 (finding 15 of the C-extension
review in issue 348) reported it, ~158 bytes per RecursionError; PR 355 ("Fix
use-after-free and leak in encoder ident handling") releases it, first in 4.0.0.

The code is older than CPython 3.11, so there is no good release on 3.11; the pair is
bad and fixed only, as leak_mmh3_hash_from_buffer is, with the bad release the first
that installs as a 3.11 wheel (3.18.1; 3.20.2, the last 3.x, leaks the same).

The scenario dumps the head of a chain of 5000 objects with `default=` a C callable
(`operator.attrgetter("child")`, so no Python frame uses up the recursion limit first):
every call ends in a RecursionError at the limit, which the caller catches (a request
that fails and is answered). What leaks per call is the one id object, 32 bytes (48
with malloc's header; the heap figure also carries the allocator's slack). Each call
runs ~1000 levels deep: ~1 ms.

Truth: benchmarks/corpuskit/truth.py leak_simplejson_default_recursion --calls 10000
(200 warm-up calls, then up to 10000 in 30 s: ~8900 in 3.18.1, ~9600 in 4.0.0; heap in
use after gc.collect(), PYTHONMALLOC=malloc, tcache off).
It measured 51.4 B/call in 3.18.1 (55.2 in the second half; tracemalloc, 3000 calls:
+32.5 B/call, the int) and 0.05 in 4.0.0; 3.20.2 measured 51.2.
"""

CASE = {
    "title": "simplejson: the C encoder leaks an id per RecursionError at default= (<4.0.0)",
    "kind": "leak",
    "link": "https://github.com/simplejson/simplejson/issues/349",
    "package": "simplejson",
    "versions": {"good": None, "bad": "3.18.1", "fixed": "4.0.0"},
    "extra": [],
    "params": {},
    "truth": {
        "3.18.1": {"b_per_call": 51.43, "b_per_call_2nd_half": 55.24, "us_per_call": 1019.45},
        "4.0.0": {"b_per_call": 0.05, "b_per_call_2nd_half": 0.01, "us_per_call": 873.17},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_simplejson_default_recursion --calls 10000: "
        "a plain loop in each release's venv, 200 warm-up calls, then up to 10000 calls "
        "(30 s cap: 8876 and 9585); glibc heap in use (mallinfo2) after gc.collect() "
        "before, at the half and after, PYTHONMALLOC=malloc, tcache off; median time "
        "per call"
    ),
    "batch": "49b",
}


def setup(params):
    import operator

    import simplejson

    class Node:
        __slots__ = ("child",)

    head = node = Node()
    for _ in range(int(params.get("depth", 5000))):   # deeper than the recursion limit
        node.child = node = Node()
    node.child = None
    return {"dumps": simplejson.dumps, "default": operator.attrgetter("child"), "head": head}


def step(state):
    try:  # noqa: SIM105  (a request that fails and is answered)
        state["dumps"](state["head"], default=state["default"])
    except RecursionError:
        pass
