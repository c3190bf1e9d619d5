"""The step times of a sample are made into text a chunk at a time, after its memory was
read: as one list of ints, an interval of 33,000 calls of a 4 us step held ~1.7 MiB of
int objects whose arenas the allocator kept, and RSS rose and levelled off, a `plateau`
of the agent's own (toolz's suite: 17 of 142 tests read `plateau` in one run of two).
The text is the same JSON the list made, written piece by piece; what it holds at its
peak is a fraction of what the list did."""

from __future__ import annotations

import array
import json
import random
import tracemalloc
from collections.abc import Callable
from types import ModuleType


def peak(make: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        make()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_text_is_the_lists_json_and_holds_a_fraction_of_it(writer: ModuleType) -> None:
    rng = random.Random(3)
    dt = array.array("d", (rng.uniform(3e-6, 5e-6) for _ in range(33000)))
    rec = {"type": "sample", "src": "step", "i": 1}
    line = writer._ENCODE(rec)[:-1] + "".join(writer.step_times(dt)) + "}"

    def as_list() -> str:
        return str(writer._ENCODE({**rec, "dt_ns": list(map(round, map(writer._GIGA, dt)))}))

    assert json.loads(line) == json.loads(as_list())
    assert json.loads(line)["dt_ns"][:3] == [round(x * 1e9) for x in dt[:3]]
    # written piece by piece: no string of the whole line is ever made
    assert peak(lambda: max(map(len, writer.step_times(dt)))) < 0.2 * peak(as_list)
    assert json.loads("{" + "".join(writer.step_times(array.array("d")))[1:] + "}") == {
        "dt_ns": []}
