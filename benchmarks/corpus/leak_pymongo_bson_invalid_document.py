"""pymongo's C `bson` encoder (`bson._cbson`) leaks two small strings every time it
raises InvalidDocument for a top-level document. PYTHON-1982 (PR 1854, first in 4.11)
made the error message name the document: a new `handle_invalid_doc_error()` takes
`str()` of the error and of the document and builds "Invalid document {doc} | {msg}",
but it declares `msg` and `dict_str` a second time inside its `if` blocks, so the
cleanup at its end drops the outer, always-NULL, pointers and both strings stay
alive. 4.10.1 had no such rewrite of the message; 4.15.3 names the variables once
(PYTHON-5571, PR 2573: "Fix a memory leak when raising InvalidDocument with C
extensions").

The scenario encodes a one-key document whose key holds a NULL byte (an
InvalidDocument raised from the C encoder with a short message) and catches the
error: what leaks per call is the two strings, the message and the document's
repr, about 150 bytes of objects, 200 with malloc's headers.

Truth: benchmarks/corpuskit/truth.py leak_pymongo_bson_invalid_document --calls 20000
(20000 calls after 200 warm-up, heap in use after gc.collect(), PYTHONMALLOC=malloc,
tcache off).
It measured 203.7 B/call in 4.11 (197.2 in the second half, RSS +197 B/call), 0.7 in
4.10.1 and 0.2 in 4.15.3: above the 16-128 B of a one-object leak, as two strings go.
"""

CASE = {
    "title": "pymongo: bson.encode leaks its error strings on InvalidDocument (4.11)",
    "kind": "leak",
    "link": "https://github.com/mongodb/mongo-python-driver/pull/2573",
    "package": "pymongo",
    "versions": {"good": "4.10.1", "bad": "4.11", "fixed": "4.15.3"},
    "extra": [],
    "params": {},
    "truth": {
        "4.10.1": {"b_per_call": 0.7, "b_per_call_2nd_half": 0.0, "us_per_call": 2.81},
        "4.11": {"b_per_call": 203.7, "b_per_call_2nd_half": 197.2, "us_per_call": 4.89},
        "4.15.3": {"b_per_call": 0.2, "b_per_call_2nd_half": 0.2, "us_per_call": 4.45},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_pymongo_bson_invalid_document --calls 20000: "
        "a plain loop in each release's venv, 200 warm-up calls, then 20000 calls; "
        "glibc heap in use (mallinfo2) after gc.collect() before, at the half and "
        "after, PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
    "batch": "49",
}


def setup(params):
    import bson
    from bson.errors import InvalidDocument

    assert bson.has_c(), "the leak is in the C extension"
    return {"encode": bson.encode, "error": InvalidDocument}


def step(state):
    try:
        state["encode"]({"a\x00": 1})
    except state["error"]:
        pass
