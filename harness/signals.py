"""Signals for long commands: SIGTERM and SIGINT both end one through KeyboardInterrupt.

A low module (stdlib only) so that the commands (`harness.cli`) and the code that runs
inside a Slurm job (`harness.runtimes.slurmjob`) share it without the runtime layer
importing the command-line layer.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """SIGTERM and SIGINT both end a long command through KeyboardInterrupt, so running
    cells are killed and finished ones kept. SIGINT is set too because a shell starts
    background jobs with it ignored, and Python then keeps it ignored."""
    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    old_term = signal.signal(signal.SIGTERM, on_term)
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)
