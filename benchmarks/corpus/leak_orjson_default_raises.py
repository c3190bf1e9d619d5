"""orjson 3.8.12 keeps the traceback of an exception raised in `default` (it chains it
as the JSONEncodeError's cause and never drops its own reference), and with the
traceback the frames and the object being serialized: every failed dumps() of a
fresh 1 KB buffer keeps it. 3.8.11 came before the change, 3.9.1 frees it ("Fix
memory leak on chained tracebacks of exceptions raised in `default`. This was
introduced in 3.8.12.", orjson's changelog).

Truth: benchmarks/corpuskit/truth.py leak_orjson_default_raises (3000 calls after 200
warm-up, heap in use after gc.collect(), PYTHONMALLOC=malloc, tcache off).
"""

CASE = {
    "title": "orjson: an exception raised in default= keeps its traceback and the object",
    "kind": "leak",
    "link": "https://github.com/ijl/orjson/issues/392",
    "package": "orjson",
    "versions": {"good": "3.8.11", "bad": "3.8.12", "fixed": "3.9.1"},
    "extra": [],
    "params": {"size": 1024},
    "truth": {
        "3.8.11": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 1.34},
        "3.8.12": {"b_per_call": 1680.4, "b_per_call_2nd_half": 1680.0, "us_per_call": 2.43},
        "3.9.1": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 1.41},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_orjson_default_raises: a plain loop in "
        "each release's venv, 200 warm-up calls, then 3000 calls; glibc heap in use "
        "(mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}


def setup(params):
    import io

    import orjson

    def default(obj):
        raise TypeError

    return {"orjson": orjson, "default": default, "io": io,
            "size": int(params.get("size", 1024))}


def step(state):
    data = state["io"].BytesIO(b"0" * state["size"])
    try:
        state["orjson"].dumps(data, default=state["default"])
    except TypeError:   # as the report's json_encode does
        data = {}
