"""msgspec msgpack Decoder(Tuple[str, ...])  # noqa: UP006 decoding a 20-tuple.

Leaks ~1.5 KB per step in msgspec 0.14.1 (variable-length tuples longer than 16;
msgspec PR #380, fixes #379), fixed in 0.14.2. Measured: 1570 heap B/step on 0.14.1,
0 on 0.14.0 and 0.14.2. params: length (default 20; 16 is a clean control).
"""


def setup(params):
    from typing import Tuple  # noqa: UP035  (the scenario runs on Python 3.6 too)

    import msgspec
    n = int(params.get("length", 20))
    buf = msgspec.msgpack.encode(tuple(f"s{i}" for i in range(n)))
    dec = msgspec.msgpack.Decoder(Tuple[str, ...])  # noqa: UP006
    return {"dec": dec, "buf": buf}


def step(state):
    state["dec"].decode(state["buf"])
