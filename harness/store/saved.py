"""Saved runs: one cell's result.json and samples.jsonl under a name, for a later run of the
same code to compare against (`check(..., save=, baseline=)`, `--harness-save/-compare`): a
one-cell results directory, replaced atomically (samples first), so a reader sees the old
run or the new, and xdist workers on other keys never meet.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from harness.errors import StoreError
from harness.protocol.series import Series
from harness.result.model import CellResult
from harness.store.results import RunStore, SeriesCache, samples_path, write_json

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Saved:
    """Where one saved run lives: `root/cells/key/`.

    Attributes:
        root: The directory of saved runs of one name (the plugin's `.harness/NAME`).
        key, label: Its directory name (`key_of` of a test id); how comparisons name it.
    """

    root: Path
    key: str
    label: str = "saved"

    @property
    def where(self) -> Path:
        return samples_path(self.root, self.key).parent

    def exists(self) -> bool:
        return self.read() is not None

    def read(self) -> tuple[CellResult, Series] | None:
        """The saved result and its samples; None when either is missing or unreadable."""
        result = RunStore(self.root).load_cell(self.key)
        series = SeriesCache(self.root)(self.key) if result is not None else None
        return None if result is None or series is None else (result, series)


def key_of(name: str) -> str:
    """A directory name for a pytest node id: its safe characters, at most 120, plus a short
    digest where any were changed or cut, so ids never collide."""
    safe = _SAFE.sub("_", name).strip("._") or "run"
    if safe == name and len(safe) <= 120:
        return safe
    return f"{safe[:120]}-{hashlib.sha256(name.encode()).hexdigest()[:10]}"


def save_cell(src: Path, cell_id: str, dest: Saved, result: CellResult) -> Path:
    """Keep the cell `cell_id` of results directory `src` and `result` as `dest`, each
    file replaced atomically; returns the saved directory.

    Raises:
        StoreError: the directory cannot be written, or the cell has no samples.
    """
    where = dest.where
    source = samples_path(src, cell_id)
    target = samples_path(dest.root, dest.key)
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    try:
        where.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, tmp)
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise StoreError(f"cannot save {source} as {target}: {exc.strerror}\n  fix: check "
                         f"that {dest.root} is writable") from exc
    write_json(where / "result.json", result.to_json())
    return where
