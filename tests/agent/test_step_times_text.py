"""The step times of a sample are made into text a chunk at a time, after its memory was
read: as one list of ints, an interval of 33,000 calls of a 4 us step held ~1.7 MiB of
int objects whose arenas the allocator kept, and RSS rose and levelled off, a `plateau`
of the agent's own (toolz's suite: 17 of 142 tests read `plateau` in one run of two).
The text is the same JSON the list made, written piece by piece; what it holds at its
peak is a fraction of what the list did. They are kept in one block made before the
first call (`stepper.STEP_TIMES`) and written from a view of it; a sample is taken
once it is full, so no interval holds more."""

from __future__ import annotations

import array
import base64
import json
import random
import re
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from harness.protocol.ingest import _float64s

AGENT = Path(__file__).resolve().parents[2] / "harness" / "agent" / "agent.py"
# the agent's modules import each other by bare name: read the constant from its text
_SHIFT = re.search(r"^STEP_TIMES = 1 << (\d+)$", (AGENT.parent / "stepper.py").read_text(),
                   re.M)
assert _SHIFT is not None
STEP_TIMES = 1 << int(_SHIFT.group(1))


def peak(make: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        make()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_text_is_the_times_and_holds_a_fraction_of_them(writer: ModuleType) -> None:
    rng = random.Random(3)
    dt = array.array("d", (rng.uniform(3e-6, 5e-6) for _ in range(33000)))
    rec = {"type": "sample", "src": "step", "i": 1}
    line = writer._ENCODE(rec)[:-1] + "".join(writer.step_times(dt)) + "}"

    def whole() -> str:
        return str(writer._ENCODE({**rec, "dt_b64": base64.b64encode(dt.tobytes()).decode()}))

    # the host reads back the very seconds, in the pieces' order
    assert json.loads(line) == json.loads(whole())
    assert _float64s(json.loads(line)["dt_b64"]) == dt.tolist()
    # written piece by piece from a view of the block, as the agent does: no string of
    # the whole line is ever made
    assert peak(lambda: max(map(len, writer.step_times(memoryview(dt))))) < 0.2 * peak(whole)
    assert json.loads("{" + "".join(writer.step_times(array.array("d")))[1:] + "}") == {
        "dt_b64": ""}
    # from a list too (a phase's settling reading gives one)
    assert "".join(writer.step_times(list(dt[:5]))) == "".join(writer.step_times(dt[:5]))
    # a view of the block holds the same times
    block = array.array("d", bytes(8 * 100))
    block[:3] = array.array("d", dt[:3])
    assert "".join(writer.step_times(memoryview(block)[:3])) == \
        "".join(writer.step_times(dt[:3]))


def test_no_sample_holds_more_step_times_than_the_block(tmp_path: Path) -> None:
    """Asked to sample only at the end of 80,000 calls, the agent takes one each time
    its block of step times is full: none holds more, and none is lost."""
    (tmp_path / "s.py").write_text("def setup(params):\n    return None\n\n\n"
                                   "def step(state):\n    pass\n")
    calls = 2 * STEP_TIMES + 15000
    out = tmp_path / "samples.jsonl"
    subprocess.run([sys.executable, str(AGENT), "--scenario", str(tmp_path / "s.py"),
                    "--iterations", str(calls), "--warmup", "0", "--sample-every",
                    str(calls), "--out", str(out), "--no-gpu", "--params", "{}"],
                   capture_output=True, text=True, timeout=120, check=True, cwd=tmp_path)
    held = [len(_float64s(r["dt_b64"]) or ()) for r in map(json.loads, out.read_text().splitlines())
            if r.get("src") == "step" and r.get("phase") == "measure"]
    assert max(held) == STEP_TIMES and sum(held) == calls, held
