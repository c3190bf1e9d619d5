"""ujson.dumps(ensure_ascii=True, default=repr) of objects whose repr is non-ASCII.

Leaks ~600 B per step in ujson <= 5.12.0 (ultrajson/ultrajson#631), fixed in 5.12.1
(PR #714). Measured: 593 heap B/step on 5.12.0, ~1 on 5.12.1 (10-30 B/step below
~1000 steps: a residue that must not count as a leak).
"""


class ExampleObject:
    def __init__(self, document, items):
        self.document = document
        self.items = items

    def __repr__(self):
        return f"PromptSearchItemMock(document={self.document}, items={self.items})"


def setup(params):
    import ujson
    return {"dumps": ujson.dumps}


def _fallback(obj):
    return repr(obj)


def step(state):
    ex = {"search_results": [ExampleObject(document="\u751f\u65e5\u5feb\u4e50",
                                           items=["computer"]) for _ in range(3)]}
    state["dumps"](ex, ensure_ascii=True, default=_fallback)
