"""Issue 85: the agent leaves glibc's malloc as a plain interpreter has it. A buffer the
agent frees before the steps (its step-time block was copied from a MiB of bytes) raised
glibc's mmap threshold for the whole run: a step whose buffers of MiBs glibc then kept
in its heap ran 2.3x faster than in the user's process (urllib3 2.0's gzip reads, 2.3 ms
against 5.4 ms by hand).

The scenario's first call allocates 600 KB, over glibc's starting threshold (128 KiB):
in a plain interpreter glibc maps it (mallinfo's hblkhd rises by it), as it does here.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from pathlib import Path

import pytest
from test_agent import run_agent, scenario

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not ctypes.util.find_library("c"),
    reason="glibc's mallinfo")

FIRST_CALL = """
import ctypes
import ctypes.util


class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                                               "hblkhd", "usmblks", "fsmblks",
                                               "uordblks", "fordblks", "keepcost")]


_libc = ctypes.CDLL(ctypes.util.find_library("c"))
_info = getattr(_libc, "mallinfo2", None)


def mapped():
    if _info is None:
        return None
    _info.restype = Info
    return _info().hblkhd


def setup(params):
    return {"first": None}


def step(state):
    if state["first"] is None:
        before = mapped()
        buffer = bytearray(600000)
        after = mapped()
        state["first"] = None if before is None else after - before
        del buffer


def info(state):
    return {"first_call_mapped": state["first"]}
"""


def test_the_first_calls_buffer_is_mapped_as_in_a_plain_interpreter(tmp_path: Path) -> None:
    proc, records = run_agent(sys.executable, scenario(tmp_path, FIRST_CALL), tmp_path,
                              "--heap", "stock", iterations=5, warmup=1, every=1)
    assert proc.returncode == 0, proc.stderr
    mapped = records[-1]["info"]["first_call_mapped"]
    if mapped is None:
        pytest.skip("this glibc has no mallinfo2")
    assert mapped >= 600000, mapped
