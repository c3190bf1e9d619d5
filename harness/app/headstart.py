"""The head starts a command gives itself (`orchestrator.prefetch_analysis`: NumPy, the
deciding modules and the reporters imported on a thread while the first cell runs),
held here so that the command waits for them before it exits (`cli.finish`): an
interpreter that ends under a thread inside a C extension's import can die of it.
Light on purpose: `cli` imports it at `harness --help` too."""

from __future__ import annotations

import threading

_HELD: list[threading.Thread] = []


def hold(thread: threading.Thread) -> threading.Thread:
    """`thread`, kept to be waited for before the command exits; returned as it is."""
    _HELD.append(thread)
    return thread


def wait(timeout: float = 60.0) -> None:
    """Wait for every head start held that still runs, each at most `timeout` seconds."""
    while _HELD:
        _HELD.pop().join(timeout=timeout)
