"""Lane scheduling: each GPU of each host runs one cell at a time (CPU-only cells of a
host share one lane); lanes run in parallel up to `max-parallel`; `gpu: all` cells, which
hold every GPU of their host, run after the others; a cluster scheduler (a runtime that
`queues_cells`) gets every cell at once."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

from harness.matrixfile.model import Cell

Lane = Callable[[list[Cell]], None]


def lanes(cells: Sequence[Cell]) -> list[list[Cell]]:
    """Group cells so each GPU of each host runs one cell at a time; CPU-only cells of a
    host share one lane."""
    out: dict[tuple[str, str], list[Cell]] = {}
    for c in cells:
        out.setdefault(c.lane, []).append(c)
    return list(out.values())


def plan(cells: Sequence[Cell], queues_cells: bool) -> tuple[list[list[Cell]], ...]:
    """The waves of lanes to run, in order."""
    if queues_cells:
        return ([[c] for c in cells],)
    spread = [c for c in cells if c.gpu.value != "all"]
    whole = [c for c in cells if c.gpu.value == "all"]
    return (lanes(spread), lanes(whole))


def run_lanes(groups: list[list[Cell]], lane: Lane, width: int | None,
              stop: threading.Event, cancel: threading.Event) -> None:
    """Run each group through `lane`, up to `width` at once (None: all). Ctrl-C (or a
    lane's exception) sets `cancel` (running cells kill their containers/processes now)
    and `stop` (no lane starts another cell). A wave that simply ends leaves both unset:
    the caller shares `stop` across its waves, and the next wave must still run."""
    width = min(len(groups), width or len(groups)) or 1
    pool = (ThreadPoolExecutor(max_workers=width, thread_name_prefix="lane")
            if width > 1 else None)
    try:
        if pool is None:
            for group in groups:
                lane(group)
            return
        futures = [pool.submit(lane, g) for g in groups]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        for f in done:
            f.result()
    except BaseException:
        cancel.set()
        stop.set()
        raise
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
