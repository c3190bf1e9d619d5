"""Each cell's parsed samples, by cell id, as a report's renderers ask for them: kept as
the sweep parsed them, else read again from cells/<id>/samples.jsonl, a bounded number
held at once."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path

from harness.protocol.ingest import read_samples
from harness.protocol.series import Series

__all__ = ["SeriesCache", "samples_path"]


def samples_path(root: Path, cell_id: str) -> Path:
    return root / "cells" / cell_id / "samples.jsonl"


class SeriesCache:
    """Each cell's parsed samples, by cell id: kept as the sweep parsed them, else read
    once from the results directory's cells/<id>/samples.jsonl on first use.

    With a results directory to read them back from, at most KEEP series are held (the
    latest): a sweep of 1,600 cells does not hold 1,600 parsed series; an older one is
    read again from its samples.jsonl when asked for."""

    KEEP = 128

    def __init__(self, root: Path | None, known: Mapping[str, Series] | None = None):
        self.root = root
        self._known: dict[str, Series] = dict(known or {})
        self._lock = threading.Lock()

    def keep(self, cell_id: str, series: Series) -> None:
        with self._lock:
            self._known.pop(cell_id, None)
            self._known[cell_id] = series
            self._bound()

    def __len__(self) -> int:
        """How many parsed series are held now."""
        with self._lock:
            return len(self._known)

    def _bound(self) -> None:
        """Let go of the oldest series beyond KEEP whose samples are on disk."""
        if self.root is None or len(self._known) <= self.KEEP:
            return
        for cid in list(self._known)[: len(self._known) - self.KEEP]:
            if samples_path(self.root, cid).is_file():
                del self._known[cid]

    def at(self, root: Path) -> SeriesCache:
        """The same series, with the others read from `root`."""
        with self._lock:
            return SeriesCache(root, self._known)

    def peek(self, cell_id: str) -> Series | None:
        """The cell's series as `__call__` gives it, but one read from disk is not kept:
        a renderer that walks every cell once holds one row's series at a time."""
        with self._lock:
            found = self._known.get(cell_id)
        if found is None and self.root is not None:
            path = samples_path(self.root, cell_id)
            if path.is_file():
                return read_samples(path)
        return found

    def __call__(self, cell_id: str) -> Series | None:
        """The cell's series; None when it was not kept and has no samples file."""
        with self._lock:
            found = self._known.get(cell_id)
            if found is None and self.root is not None:
                path = samples_path(self.root, cell_id)
                if path.is_file():
                    found = self._known[cell_id] = read_samples(path)
                    self._bound()
            return found

