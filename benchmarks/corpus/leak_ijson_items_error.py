"""ijson's yajl2_c backend does not release the buffer it reads into when the parser
reports an error: every `items()` over invalid JSON that raises keeps its read buffer
(64 KiB by default). The report's loop, `next(ijson.items(b"XXX", "whatever"))` under
`except JSONError`, grew 640 MB over 10,000 calls on 3.2.0.post0. 3.2.0.post0 is the
first release with CPython 3.11 wheels and the reading generator leaked before it,
so there is no good release here; 3.2.1 releases the buffer before returning.

Truth: benchmarks/corpuskit/truth.py leak_ijson_items_error (3000 calls after 200
warm-up, heap in use after gc.collect(), PYTHONMALLOC=malloc, tcache off).
"""

CASE = {
    "title": "ijson: yajl2_c keeps its read buffer when items() raises JSONError",
    "kind": "leak",
    "link": "https://github.com/ICRAR/ijson/issues/97",
    "package": "ijson",
    "versions": {"bad": "3.2.0.post0", "fixed": "3.2.1"},
    "extra": [],
    "params": {},
    "truth": {
        "3.2.0.post0": {"b_per_call": 65632.4, "b_per_call_2nd_half": 65630.2,
                        "us_per_call": 41.95},
        "3.2.1": {"b_per_call": 0.5, "b_per_call_2nd_half": 0.1, "us_per_call": 8.29},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_ijson_items_error: a plain loop in each "
        "release's venv, 200 warm-up calls, then 3000 calls; glibc heap in use "
        "(mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}


def setup(params):
    import ijson.backends.yajl2_c as backend
    from ijson import JSONError
    return {"items": backend.items, "error": JSONError}


def step(state):
    try:
        next(state["items"](b"XXX", "whatever"))
    except state["error"]:
        return
