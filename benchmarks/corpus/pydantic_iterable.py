"""pydantic 2 validates a field typed `Iterable[int]` into a lazy validator-iterator
that holds the model's own __dict__, a cycle the garbage collector cannot see through
(the iterator did not report what it holds): every model built leaks its list and
iterator. The lazy iterator came with pydantic 2.0 (1.10.13 validates the field without
it and keeps nothing); 2.6.4 and 2.7.0 leak alike (864 B/call, measured); pydantic-core's
fix (PR 1271, traversal for the iterator) shipped in pydantic 2.7.1.

Truth: benchmarks/corpuskit/truth.py pydantic_iterable (heap in use after
gc.collect(), PYTHONMALLOC=malloc, tcache off).
"""

CASE = {
    "title": "pydantic: a model with an Iterable[int] field leaks each instance",
    "kind": "leak",
    "link": "https://github.com/pydantic/pydantic/issues/9243",
    "package": "pydantic",
    "versions": {"good": "1.10.13", "bad": "2.0", "fixed": "2.7.1"},
    "extra": [],
    "params": {},
    "truth": {
        "1.10.13": {"b_per_call": 0.0, "b_per_call_2nd_half": 0.0, "us_per_call": 2.36},
        "2.0": {"b_per_call": 1088.7, "b_per_call_2nd_half": 1088.2, "us_per_call": 1.8},
        "2.7.1": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 1.26},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py pydantic_iterable: a plain loop in each "
        "release's venv, 200 warm-up calls, then 3000 calls; glibc heap in use "
        "(mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}


def setup(params):
    from typing import Iterable  # noqa: UP035

    from pydantic import BaseModel

    class Trace(BaseModel):
        elements: Iterable[int]

    return {"cls": Trace}


def step(state):
    state["cls"](elements=[1, 2, 3])
