"""msgspec msgpack Decoder(Tuple[str, ...]) decoding a 20-tuple.

Leaks ~1.5 KB per step in msgspec 0.14.1 (variable-length tuples longer than 16;
msgspec PR #380, fixes #379), fixed in 0.14.2. Measured: 1570 heap B/step on 0.14.1,
0 on 0.14.0 and 0.14.2. params: length (default 20; 16 is a clean control).
"""


def setup(params):
    from typing import Tuple

    import msgspec
    n = int(params.get("length", 20))
    buf = msgspec.msgpack.encode(tuple("s%d" % i for i in range(n)))
    return {"dec": msgspec.msgpack.Decoder(Tuple[str, ...]), "buf": buf}


def step(state):
    state["dec"].decode(state["buf"])
