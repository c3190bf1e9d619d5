"""ujson.dumps(..., ensure_ascii=True, default=f) leaks the string that `default`
returns when that string is not ASCII: about 600 B a call for three objects whose repr
holds CJK text. Fixed in 5.12.1.

Truth: benchmarks/corpuskit/truth.py ujson_default (3000 calls after 200 warm-up, heap
in use after gc.collect(), PYTHONMALLOC=malloc, tcache off).
"""

CASE = {
    "title": "ujson: dumps(ensure_ascii=True, default=...) leaks non-ASCII default results",
    "kind": "leak",
    "link": "https://github.com/ultrajson/ultrajson/issues/631",
    "package": "ujson",
    "versions": {"good": None, "bad": "5.6.0", "fixed": "5.12.1"},
    "extra": [],
    "params": {},
    "truth": {
        "5.6.0": {"b_per_call": 603.9, "b_per_call_2nd_half": 602.2, "us_per_call": 8.77},
        "5.12.1": {"b_per_call": 1.8, "b_per_call_2nd_half": 1.3, "us_per_call": 8.35},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py ujson_default: a plain loop in each release's "
        "venv, 200 warm-up calls, then 3000 calls; glibc heap in use (mallinfo2) "
        "after gc.collect() before, at the half and after, PYTHONMALLOC=malloc, "
        "tcache off; median time per call"
    ),
}


class ExampleObject:
    def __init__(self, document, items):
        self.document = document
        self.items = items

    def __repr__(self):
        return f"PromptSearchItemMock(document={self.document}, items={self.items})"


def _fallback(obj):
    return repr(obj)


def setup(params):
    import ujson
    return {"dumps": ujson.dumps}


def step(state):
    ex = {"search_results": [ExampleObject(document="\u751f\u65e5\u5feb\u4e50",
                                           items=["computer"]) for _ in range(3)]}
    state["dumps"](ex, ensure_ascii=True, default=_fallback)
