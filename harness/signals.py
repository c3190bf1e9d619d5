"""Signals for long commands: SIGTERM and SIGINT both end one through KeyboardInterrupt.

Stdlib only, so the CLI and code inside a Slurm job (`harness.runtimes.slurm`) share it
without the runtime layer importing the CLI.
"""

from __future__ import annotations

import _thread
import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

# Set while a long command runs cells: a closed stdout/stderr then ends it (`stream_closed`).
_RUNNING = threading.Event()


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """SIGTERM and SIGINT both end a long command through KeyboardInterrupt, so running
    cells are killed and finished ones kept. SIGINT is set too because a shell starts
    background jobs with it ignored."""
    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    old_term = signal.signal(signal.SIGTERM, on_term)
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    _RUNNING.set()
    try:
        yield
    finally:
        _RUNNING.clear()
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)


def stream_closed() -> bool:
    """The reader of stdout or stderr left, or the stream cannot be written: while cells
    run, the command ends as an interruption (KeyboardInterrupt in the main thread), so
    finished cells are kept for `--resume`. True when it did; outside a run, False."""
    if not _RUNNING.is_set():
        return False
    _RUNNING.clear()        # once: the message of the interruption may fail to print too
    main = threading.main_thread().ident
    if main is None or not hasattr(signal, "pthread_kill"):
        _thread.interrupt_main()
        return True
    # A real SIGINT, as Ctrl-C: it wakes a main thread blocked in a wait, which
    # interrupt_main's flag alone would not.
    signal.pthread_kill(main, signal.SIGINT)
    return True
