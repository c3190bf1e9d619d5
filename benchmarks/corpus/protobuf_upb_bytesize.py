"""protobuf (upb backend): ByteSize() on a sub-message leaks 80 bytes a call.

protobuf 4.21.0 moved the Python package onto the upb C backend. Calling ByteSize() on a
sub-message that is not set yet (the report uses ``Type().source_context``) makes upb
materialise the empty sub-message in the parent's arena on every call, and the arena
never gives it back while the parent lives: RSS grows by ~80 B per call, invisible to
tracemalloc (the memory is upb's, not Python's). Fixed in 4.24.3; 3.20.3 (pure Python
implementation on CPython 3.11) does not leak.

The step is the report's loop body, ``parent.source_context.ByteSize()``, on one
``google.protobuf.type_pb2.Type`` made in setup (a well-known type: no generated code).

Truth, by hand, in each version's venv: 1,000 warm-up calls, gc.collect(), then RSS
(psutil) over 200,000 calls; tracemalloc over 20,000 more.
"""

CASE = {
    "title": "protobuf upb: ByteSize() on an unset sub-message leaks 80 B/call",
    "kind": "leak",
    "link": "https://github.com/protocolbuffers/upb/issues/1243",
    "package": "protobuf",
    "versions": {"good": "3.20.3", "bad": "4.21.0", "fixed": "4.24.3"},
    "extra": [],
    "params": {},
    "truth": {
        "3.20.3": {"b_per_call": 0},
        "4.21.0": {"b_per_call": 80},
        "4.24.3": {"b_per_call": 0},
    },
    "measured": (
        "p = Type(); p.source_context.ByteSize() 1,000 times, gc.collect(), RSS over "
        "200,000 calls: 3.20.3 (python impl) 0, 4.21.0/4.21.12/4.22.1/4.23.4/4.24.0/"
        "4.24.1/4.24.2 (upb) 80.0 B/call, 4.24.3/4.24.4/4.25.0 0; tracemalloc 0 B/call in "
        "every version. 4.21.0 is yanked on the index (python_requires) but installs "
        "when pinned."
    ),
}


def setup(params):
    from google.protobuf.type_pb2 import Type

    return {"parent": Type()}


def step(state):
    state["parent"].source_context.ByteSize()
