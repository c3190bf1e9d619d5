"""msgspec 0.14.1's msgpack decoder leaks the buffer it uses for a variable-length
tuple (`Tuple[str, ...]`) longer than 16 items: about 1.5 KB a decode of a 20-tuple.
0.14.0 came before the change, 0.14.2 frees it.

Truth: benchmarks/corpuskit/truth.py msgspec_tuple (3000 calls after 200 warm-up, heap
in use after gc.collect(), PYTHONMALLOC=malloc, tcache off).
"""

CASE = {
    "title": "msgspec: msgpack Decoder(Tuple[str, ...]) leaks on tuples longer than 16",
    "kind": "leak",
    "link": "https://github.com/jcrist/msgspec/pull/380",
    "package": "msgspec",
    "versions": {"good": "0.14.0", "bad": "0.14.1", "fixed": "0.14.2"},
    "extra": [],
    "params": {"length": 20},
    "truth": {
        "0.14.0": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 0.82},
        "0.14.1": {"b_per_call": 1574.2, "b_per_call_2nd_half": 1578.7, "us_per_call": 0.94},
        "0.14.2": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 0.93},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py msgspec_tuple: a plain loop in each release's "
        "venv, 200 warm-up calls, then 3000 calls; glibc heap in use (mallinfo2) "
        "after gc.collect() before, at the half and after, PYTHONMALLOC=malloc, "
        "tcache off; median time per call"
    ),
}


def setup(params):
    from typing import Tuple  # noqa: UP035

    import msgspec
    n = int(params.get("length", 20))
    buf = msgspec.msgpack.encode(tuple(f"s{i}" for i in range(n)))
    return {"dec": msgspec.msgpack.Decoder(Tuple[str, ...]), "buf": buf}  # noqa: UP006


def step(state):
    state["dec"].decode(state["buf"])
