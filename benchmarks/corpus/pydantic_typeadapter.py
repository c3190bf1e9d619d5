"""pydantic 2.5's core leaks the validator it builds for a self-referencing model when a
TypeAdapter(list[Foo]) is made and used per call: each call's schema stays alive.
2.4.2 is clean, 2.5.3 ships the pydantic-core fix.

Truth: benchmarks/corpuskit/truth.py pydantic_typeadapter (heap in use after
gc.collect(), PYTHONMALLOC=malloc, tcache off).
"""

CASE = {
    "title": "pydantic: TypeAdapter(list[Model]) with a recursive model leaks per call",
    "kind": "leak",
    "link": "https://github.com/pydantic/pydantic/issues/8397",
    "package": "pydantic",
    "versions": {"good": "2.4.2", "bad": "2.5.0", "fixed": "2.5.3"},
    "extra": [],
    "params": {},
    "truth": {
        "2.4.2": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 270.01},
        "2.5.0": {"b_per_call": 7725.5, "b_per_call_2nd_half": 7720.7, "us_per_call": 343.99},
        "2.5.3": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 261.26},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py pydantic_typeadapter: a plain loop in each "
        "release's venv, 200 warm-up calls, then 3000 calls; glibc heap in use "
        "(mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}


def setup(params):
    from typing import List  # noqa: UP035

    from pydantic import BaseModel, TypeAdapter

    class Bar(BaseModel):
        pass

    class Foo(BaseModel):
        children: "List[Foo]"  # noqa: UP006
        bar: Bar

    Foo.model_rebuild()
    return {"ta": TypeAdapter, "list": List[Foo], "bar": Bar}  # noqa: UP006


def step(state):
    state["ta"](state["list"]).validate_python([{"children": [], "bar": state["bar"]()}])
