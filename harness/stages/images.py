"""Stage 1, prepare the image: pulled or built once per host, ahead of the cells that
need it, so the next image is ready when its cell starts; but never while a cell is
being measured on the same host (a pull or a venv build beside a measured cell makes
its steps slower and its memory noisier: on a busy host, leak cells read as 3.5x
slower "findings" while the next image's venv was built). A cluster runtime (one that
`queues_cells`) measures its cells on other machines, and prepares ahead freely."""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor

from harness.matrixfile.model import Cell
from harness.runtimes.base import ImageInfo, Progress, Runtime


class ImagePool:
    """One worker prepares one image at a time, in the order cells were queued; on one
    host, preparing and measuring take turns (`measuring`): a prepare starts once no
    cell of its host runs, and a cell's run starts once the prepare under way ends."""

    def __init__(self, runtime_for: Callable[[Cell], Runtime], progress: Progress):
        self.runtime_for = runtime_for
        self.progress = progress
        self._images: dict[str, Future[ImageInfo]] = {}
        self._queued: list[Cell] = []           # the cells whose images were queued
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prepare")
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._measuring: dict[str, int] = {}    # host label -> cells being measured
        self._preparing: dict[str, int] = {}    # host label -> images being prepared
        self._closed = False

    def _future(self, cell: Cell) -> Future[ImageInfo]:
        key = f"{cell.host.label}/{cell.image.label}"
        with self._lock:
            if key not in self._images:
                self._images[key] = self._pool.submit(self._prepare, cell)
                self._images[key].add_done_callback(
                    functools.partial(self._failed, label=cell.image.label))
            return self._images[key]

    def _failed(self, prepared: Future[ImageInfo], *, label: str) -> None:
        """Said as soon as an image cannot be prepared, not when its first cell's turn
        comes after the others' (a new user waited through every other cell to learn
        that one pin was wrong)."""
        if prepared.cancelled() or self._closed:
            return
        exc = prepared.exception()
        if exc is not None and not isinstance(exc, CancelledError):
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            self.progress(f"{label}: cannot be prepared ({first}); its cells end "
                          "unavailable when their turn comes")

    def _prepare(self, cell: Cell) -> ImageInfo:
        runtime = self.runtime_for(cell)
        if runtime.queues_cells:
            return runtime.prepare(cell.image, self.progress)
        host = cell.host.label
        with self._idle:
            self._idle.wait_for(lambda: self._closed or not self._measuring.get(host))
            if self._closed:
                raise CancelledError
            self._preparing[host] = self._preparing.get(host, 0) + 1
        try:
            return runtime.prepare(cell.image, self.progress)
        finally:
            with self._idle:
                self._preparing[host] -= 1
                self._idle.notify_all()

    @contextlib.contextmanager
    def measuring(self, cell: Cell) -> Iterator[None]:
        """While the cell runs, no image of its host is pulled or built: it starts once
        a prepare under way ends, and holds the next one back until it ends."""
        if self.runtime_for(cell).queues_cells:
            yield
            return
        host = cell.host.label
        with self._idle:
            self._idle.wait_for(lambda: not self._preparing.get(host))
            self._measuring[host] = self._measuring.get(host, 0) + 1
        try:
            yield
        finally:
            with self._idle:
                self._measuring[host] -= 1
                self._idle.notify_all()

    def ready(self, cell: Cell) -> bool:
        """Whether the cell's image is prepared (or failed to be) already."""
        return self._future(cell).done()

    def built(self, cell: Cell) -> bool:
        """Whether the cell's image is prepared, not failed or cancelled (Ctrl-C)."""
        f = self._future(cell)
        return f.done() and not f.cancelled() and f.exception() is None

    def get(self, cell: Cell) -> ImageInfo:
        """The cell's image, prepared (raises what preparing it raised)."""
        return self._future(cell).result()

    def prefetch(self, cells: Iterable[Cell]) -> None:
        """Queue every image the cells need, in run order."""
        for cell in cells:
            self._queued.append(cell)
            self._future(cell)

    def keep_only(self, runs: Callable[[Cell], bool]) -> None:
        """Cancel the queued (not yet started) images that no queued cell that still
        `runs` uses: the images of cells that will not run now."""
        keys = [(f"{c.host.label}/{c.image.label}", runs(c)) for c in self._queued]
        keep = {key for key, still in keys if still}
        with self._lock:
            for key in {key for key, _ in keys} - keep:
                self._images[key].cancel()

    def close(self) -> None:
        """Drop what has not started; a running build is the runtime's to abort."""
        with self._idle:
            self._closed = True
            self._idle.notify_all()
        self._pool.shutdown(wait=False, cancel_futures=True)
