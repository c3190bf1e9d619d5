"""pydantic 2.9.2: serializing a tree whose nodes keep an excluded parent link is
hundreds of times slower than in 2.9.1.

pydantic 2.9.2 (pydantic-core 2.23.4) changed how a union of models is serialized: to
pick the union member it now checks the value's fields, and it walks a field marked
``Field(exclude=True)`` as well, so a node's excluded ``parent`` link sends it back up
the tree from every node. The report measured ~10x slower serialization of a large
nested tree, and 75,000x slower once the nodes keep their parent. 2.10.x is as slow;
2.11.0 is back at 2.9.1's time.

The step is the report's: a tree of ``ParentNode``/``LeafNode`` models (children a
``list[Union[ParentNode, LeafNode]]``, each node's ``parent`` excluded from
serialization), here depth 2 with 3 children per node, serialized with
``model_dump_json()``.

Truth, by hand: median CPU time per call (time.process_time) of 7 blocks after one
warm-up call, the case's own setup and step loaded from this file; 2.9.1, 2.9.2 and
2.11.0 run in turn, three rounds.
"""

CASE = {
    "title": "pydantic: model_dump_json of a tree with excluded parent links ~400x slower in 2.9.2",
    "kind": "slowdown",
    "link": "https://github.com/pydantic/pydantic/issues/10709",
    "package": "pydantic",
    "versions": {"good": "2.9.1", "bad": "2.9.2", "fixed": "2.11.0"},
    "extra": [],
    "params": {"depth": 2, "fan": 3},
    "truth": {
        "2.9.1": {"us_per_call": 12.1},
        "2.9.2": {"us_per_call": 4942},
        "2.11.0": {"us_per_call": 9.1},
    },
    "measured": (
        "setup() once, step() once, then 7 blocks of step() (500 calls a block, 10 on "
        "2.9.2), median CPU us/call; three rounds, releases in turn: 2.9.1 21.2/12.1/11.7, "
        "2.9.2 4942/5042/3349, 2.11.0 9.9/9.1/8.7; bad/good ~400x, fixed/good 0.75x "
        "(medians of the rounds). Beside, 2.10.6 (pydantic-core 2.27.2) is as slow as "
        "2.9.2 (~3100 us/call with model_dump()); 2.11.10 and 2.12.5 are fast (7 us/call). "
        "Without the parent links (depth 3, 5 children) 2.9.2 is still 3x slower than "
        "2.9.1 (421 vs 132 us/call, model_dump())."
    ),
}


def setup(params):
    from typing import Literal, Optional, Union

    from pydantic import BaseModel, Field

    class LeafNode(BaseModel):
        node_type: Literal["leaf"] = "leaf"
        value: int
        parent: Optional["ParentNode"] = Field(default=None, exclude=True)

    class ParentNode(BaseModel):
        node_type: Literal["parent"] = "parent"
        children: list[Union["ParentNode", LeafNode]] = []
        parent: Optional["ParentNode"] = Field(default=None, exclude=True)

    ns = {"ParentNode": ParentNode, "LeafNode": LeafNode}
    LeafNode.model_rebuild(_types_namespace=ns)
    ParentNode.model_rebuild(_types_namespace=ns)

    def build(depth, parent):
        node = ParentNode(parent=parent)
        for i in range(int(params.get("fan", 3))):
            node.children.append(build(depth - 1, node) if depth > 1
                                 else LeafNode(value=i, parent=node))
        return node

    return {"tree": build(int(params.get("depth", 2)), None)}


def step(state):
    state["tree"].model_dump_json()
