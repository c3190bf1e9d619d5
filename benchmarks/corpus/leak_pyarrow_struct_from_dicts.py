"""pyarrow's conversion of Python dicts to a struct array leaks per dict: the
struct converter in `python_to_arrow.cc` calls `PyDict_Items()` (and
`PySequence_GetItem()` for each key/value pair) and never releases the new
references, so `pa.array(list_of_dicts, type=struct)` keeps, for every dict, the
items list and its (key, value) tuples. GH-37989 (`Table.from_pandas()` leaking on
nested dicts) was fixed by PR 40412 ("Plug reference leaks when creating Arrow array
from Python list of dicts"), first released in 16.0.0.

The leaking code predates the first pyarrow with a CPython 3.11 wheel (10.0.1; the
leak measures the same there and in 12.0.1), so there is no good release on 3.11;
the pair is bad and fixed only, as leak_greenlet_switch_py311 is, with the bad
release the first that installs as a 3.11 wheel. numpy is pinned below 2 because
pyarrow 10 was built against numpy 1.x.

The scenario converts one record whose optional field is absent (`{}`) to a
one-field struct array; what leaks per call is that dict's empty items list, 64
bytes with malloc's header (a record with one present field keeps about 165 bytes:
the list, its item array and the pair tuple).

Truth: benchmarks/corpuskit/truth.py leak_pyarrow_struct_from_dicts --calls 20000
(20000 calls after 200 warm-up, heap in use after gc.collect(), PYTHONMALLOC=malloc,
tcache off).
It measured 64.0 B/call in 10.0.1 (the same in the second half; RSS did not move) and
0.0 in 16.0.0.
"""

CASE = {
    "title": "pyarrow: pa.array() of dicts to a struct keeps each dict's items (<16.0)",
    "kind": "leak",
    "link": "https://github.com/apache/arrow/pull/40412",
    "package": "pyarrow",
    "versions": {"good": None, "bad": "10.0.1", "fixed": "16.0.0"},
    "extra": ["numpy==1.26.4"],
    "params": {},
    "truth": {
        "10.0.1": {"b_per_call": 64.0, "b_per_call_2nd_half": 64.0, "us_per_call": 8.36},
        "16.0.0": {"b_per_call": 0.0, "b_per_call_2nd_half": 0.0, "us_per_call": 8.74},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_pyarrow_struct_from_dicts --calls 20000: a "
        "plain loop in each release's venv, 200 warm-up calls, then 20000 calls; glibc "
        "heap in use (mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
    "batch": "49",
}


def setup(params):
    import pyarrow as pa

    return {"array": pa.array, "type": pa.struct([("a", pa.int64())]), "rows": [{}]}


def step(state):
    return state["array"](state["rows"], type=state["type"])
