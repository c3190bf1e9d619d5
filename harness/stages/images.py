"""Stage 1, prepare the image: pulled or built once per host, ahead of the cells that
need it, so the next image is pulled while the current cell runs."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor

from harness.matrixfile.model import Cell
from harness.runtimes.base import ImageInfo, Progress, Runtime


class ImagePool:
    """One worker prepares one image at a time, in the order cells were queued."""

    def __init__(self, runtime_for: Callable[[Cell], Runtime], progress: Progress):
        self.runtime_for = runtime_for
        self.progress = progress
        self._images: dict[str, Future[ImageInfo]] = {}
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prepare")
        self._lock = threading.Lock()

    def _future(self, cell: Cell) -> Future[ImageInfo]:
        key = f"{cell.host.label}/{cell.image.label}"
        with self._lock:
            if key not in self._images:
                self._images[key] = self._pool.submit(
                    self.runtime_for(cell).prepare, cell.image, self.progress)
            return self._images[key]

    def get(self, cell: Cell) -> ImageInfo:
        """The cell's image, prepared (raises what preparing it raised)."""
        return self._future(cell).result()

    def prefetch(self, cells: Iterable[Cell]) -> None:
        """Queue every image the cells need, in run order."""
        for cell in cells:
            self._future(cell)

    def close(self) -> None:
        """Drop what has not started; a running build is the runtime's to abort."""
        self._pool.shutdown(wait=False, cancel_futures=True)
