"""jsonschema 4.0: validate() on a schema full of local $refs got ~5x slower.

jsonschema 4.0.0 (draft 2020-12 support) made RefResolver.resolve_fragment look every
fragment up as a $anchor / $dynamicAnchor / $id first, walking the whole schema document
each time, before falling back to the JSON pointer. A schema like OpenAPI's, with many
"#/definitions/..." references, pays that walk on every $ref, both when the instance is
checked and when validate() checks the schema itself. 4.3.1 caches the lookup on the
referring document and recovers most of it, but not all: on this scenario 4.3.1 stays
~1.4x slower than 3.2.0 (CPU), and harness measured 1.53x in wall time, as the later
report python-jsonschema/jsonschema#1231 says of 4.3.1 too. So the case has no fixed
release; 4.3.1's figures are kept in "measured".

The step is the report's loop body: ``jsonschema.validate(instance=data, schema=schema)``
with one fixed OpenAPI-like schema (40 definitions chained by $ref through anyOf) and one
instance (4 items, each a chain of 4 referenced objects).

Truth, by hand: median per-call time of 7 blocks of 30 calls, each version run three
times in turn within two minutes (time.process_time, since the machine's load average
was 10-14 on 2 cores and wall time was 3-4x CPU time), three more rounds of 3.2.0 and
4.3.1 later; the median of the runs.
"""

CASE = {
    "title": "jsonschema: validate() with many local $refs ~5x slower in 4.0",
    "kind": "slowdown",
    "link": "https://github.com/python-jsonschema/jsonschema/issues/853",
    "package": "jsonschema",
    "versions": {"good": "3.2.0", "bad": "4.0.0", "fixed": None},
    "extra": [],
    "params": {},
    "truth": {
        "3.2.0": {"us_per_call": 4052},
        "4.0.0": {"us_per_call": 19703},
    },
    "measured": (
        "validate(instance, schema) once, then 7 blocks of 30 calls; median CPU us/call "
        "(time.process_time) per run; runs 3.2.0, 4.0.0, 4.3.1 in turn, three rounds: "
        "3.2.0 4837/5122/3351, 4.0.0 24346/19460/19703, 4.3.1 5966/5099/5164; three "
        "more rounds of 3.2.0 and 4.3.1 alone: 4125/5716, 3979/5906, 3949/5605. 3.2.0's "
        "truth is the median of its six rounds, 4052: bad/good 4.9x; 4.3.1/good 1.4x. "
        "Wall-clock medians (noisy, load 10+): 3.2.0 8-21 ms, "
        "4.0.0 71-97 ms, 4.3.1 15-25 ms. 4.0.0 is yanked on the index (python_requires) "
        "but installs when pinned; 4.3.0 is still slow (72-132 ms wall)."
    ),
}

_N_DEFS = 40


def _schema():
    defs = {}
    for i in range(_N_DEFS):
        nxt = {"$ref": f"#/definitions/Item{(i + 1) % _N_DEFS}"}
        defs[f"Item{i}"] = {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "size": {"type": "integer", "minimum": 0},
                "next": {"anyOf": [{"type": "null"}, nxt]},
            },
        }
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": defs,
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"$ref": "#/definitions/Item1"}}},
    }


def _chain(depth):
    return {"name": "n", "size": 1, "next": _chain(depth - 1) if depth else None}


def setup(params):
    import jsonschema

    return {"validate": jsonschema.validate, "schema": _schema(),
            "data": {"items": [_chain(3) for _ in range(4)]}}


def step(state):
    state["validate"](instance=state["data"], schema=state["schema"])
