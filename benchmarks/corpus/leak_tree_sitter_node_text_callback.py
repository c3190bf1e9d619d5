"""py-tree-sitter's `Node.text` leaks a chunk of source per call on a tree parsed from a
read callback. When a tree keeps a callable as its source (`Parser.parse(read_callable)`,
kept for `.text` and queries since 0.25.0), `node_get_text()` (tree_sitter/binding/node.c)
collects the node's bytes by calling the callback from the node's start point onwards;
`PyObject_Call()` gives it a new reference to each chunk returned, which the error paths
release but the success path never does, so every chunk read stays alive. Issue 464
("Possible Reference leak in callable-backed node_get_text()") reported it; the fix
(commit dac834e, "fix(node): fix reference leak", closes #464) adds the missing
`Py_XDECREF(rv)`, first released in 0.26.0.

The callable branch came with 0.25.0 (commit 52c190d, "keep parser callback for
queries"); 0.24.0 keeps no source for a callable and answers `.text` with None, so it is
the good release (the same call, without the leaking branch). All three releases load
the same grammar (tree-sitter-python 0.23.6, ABI 14).

The scenario parses the README's example through its `read_callable_point` reader (each
read returns the rest of one source line, from the point asked for) and reads `.text` of
the `baz()` call node once per call, as a linter or indexer that parsed a buffer through
a reader would. Each `.text` makes one callback call, which returns `b"baz()\\n"`: that
39-byte bytes object (48 with malloc's header) leaks per call.

Truth: benchmarks/corpuskit/truth.py leak_tree_sitter_node_text_callback --calls 20000
(20000 calls after 200 warm-up, heap in use after gc.collect(), PYTHONMALLOC=malloc,
tcache off).
It measured 48.1 B/call in 0.25.0 (48.0 in the second half, RSS +44 B/call), 0.0 in
0.24.0 and 0.26.0.
"""

CASE = {
    "title": "tree-sitter: Node.text keeps each chunk its read callback returns (0.25.x)",
    "kind": "leak",
    "link": "https://github.com/tree-sitter/py-tree-sitter/issues/464",
    "package": "tree-sitter",
    "versions": {"good": "0.24.0", "bad": "0.25.0", "fixed": "0.26.0"},
    "extra": ["tree-sitter-python==0.23.6"],
    "params": {},
    "truth": {
        "0.24.0": {"b_per_call": 0.02, "b_per_call_2nd_half": 0.0, "us_per_call": 0.18},
        "0.25.0": {"b_per_call": 48.06, "b_per_call_2nd_half": 48.01, "us_per_call": 3.14},
        "0.26.0": {"b_per_call": 0.02, "b_per_call_2nd_half": 0.0, "us_per_call": 1.32},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_tree_sitter_node_text_callback --calls 20000: "
        "a plain loop in each release's venv, 200 warm-up calls, then 20000 calls; glibc "
        "heap in use (mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
    "batch": "49c",
}

SRC_LINES = ["\n", "def foo():\n", "    if bar:\n", "        baz()\n"]


def setup(params):
    import tree_sitter_python
    from tree_sitter import Language, Parser

    def read_callable_point(byte_offset, point):   # the README's line reader
        row, column = point
        if row >= len(SRC_LINES) or column >= len(SRC_LINES[row]):
            return None
        return SRC_LINES[row][column:].encode("utf8")

    parser = Parser(Language(tree_sitter_python.language()))
    tree = parser.parse(read_callable_point, encoding="utf8")
    function_node = tree.root_node.children[0]
    if_node = function_node.child_by_field_name("body").child(0)
    call_node = if_node.child_by_field_name("consequence").child(0).child(0)
    assert call_node.type == "call", call_node.type
    return {"tree": tree, "node": call_node}


def step(state):
    return state["node"].text
