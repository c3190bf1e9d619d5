"""results.index: where each cell's line of results.json is, so that `harness report`
reads 10,000 cells from one file it has open instead of 10,000 result.json files, each
line used only while its cell's result.json is still the file it was made from.

`report.write_all` writes it with results.json (`index_text`): per cell, the stamp of
its result.json when the line was made (size, mtime in ns and inode: a file written
again, by a resumed sweep, a re-run or by hand, is a new inode and a new time), the
line's place in results.json and its CRC-32; and results.json's own stamp, so a
results.json written since by anything else leaves the whole index unused. A cell is
indexed only where its line says all its result.json says (host samples none; written
or read by this harness, of the schema it writes). `store.results.read_cells` takes a
cell from its line where the stamps and the CRC agree and msgspec decodes the line as
it stands (`Lines.result`); every other cell is read from its result.json as before.
"""

from __future__ import annotations

import contextlib
import os
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import msgspec

from harness.result.model import SCHEMA, CellResult
from harness.store.resultsjson import Stamp, stamp_of

__all__ = ["INDEX_FILE", "Entry", "Lines", "index_text", "lines_of"]

INDEX_FILE = "results.index"
VERSION = 1
RESULTS_FILE = "results.json"
Entry = tuple[Stamp, int, int, int]   # result.json's stamp; offset, length, CRC-32 of its line


@dataclass(frozen=True)
class _Index:
    """results.index as written (`index_text`)."""

    version: int
    schema: int
    results: tuple[int, int, int]
    cells: dict[str, tuple[int, int, int, int, int, int]]


def index_text(results: Stamp, entries: Mapping[str, Entry]) -> str:
    """The index of a results.json (`results`: its stamp as written) whose cells' lines
    are at `entries`."""
    index = _Index(VERSION, SCHEMA, results, {
        cid: (*stamp, offset, length, crc)
        for cid, (stamp, offset, length, crc) in sorted(entries.items())})
    return msgspec.json.encode(index).decode("utf-8") + "\n"


def _entries(root: Path) -> tuple[Stamp, dict[str, Entry]] | None:
    """The index in `root`: results.json's stamp and the cells' entries; None where
    there is none, or one of another version or schema, or not of this shape. A cell
    whose result.json is not older than the index is left out (racy, as git calls it:
    written again in place within the same tick of the file system's clock, to the
    same size, it would keep the stamp the index holds)."""
    try:
        with (root / INDEX_FILE).open("rb") as f:
            written = os.fstat(f.fileno()).st_mtime_ns
            found = msgspec.json.decode(f.read(), type=_Index)
    except (OSError, msgspec.DecodeError):
        return None
    if found.version != VERSION or found.schema != SCHEMA:
        return None
    return found.results, {cid: ((e[0], e[1], e[2]), e[3], e[4], e[5])
                           for cid, e in found.cells.items() if e[1] < written}


class Lines:
    """An open results.json that its index describes: the lines of cells whose
    result.json is still the one indexed."""

    def __init__(self, f: IO[bytes], entries: dict[str, Entry]):
        self._fd = f.fileno()
        self._entries = entries

    def line(self, cell_id: str, stamp: Stamp) -> bytes | None:
        """The cell's line of results.json, where its result.json's `stamp` is the
        indexed one and the line's bytes are the indexed ones; else None."""
        entry = self._entries.get(cell_id)
        if entry is None or entry[0] != stamp:
            return None
        _, offset, length, crc = entry
        try:
            raw = os.pread(self._fd, length, offset)
        except OSError:
            return None
        return raw if len(raw) == length and zlib.crc32(raw) == crc else None

    def result(self, cell_id: str, path: str) -> tuple[CellResult, Stamp] | None:
        """The cell's result read from its line, and its result.json's stamp now, where
        the line stands for that file (`line`) and decodes as it stands (strictly, as
        `result.codec.decode` first tries: what it would read otherwise, the file is
        read for); else None."""
        try:
            stamp = stamp_of(os.stat(path))
        except OSError:
            return None
        raw = self.line(cell_id, stamp)
        if raw is None:
            return None
        try:
            res = msgspec.json.decode(raw, type=CellResult)
        except msgspec.DecodeError:
            return None
        return (res, stamp) if res.id == cell_id and res.schema == SCHEMA else None


@contextlib.contextmanager
def lines_of(root: Path) -> Iterator[Lines | None]:
    """`root`'s results.json opened with its index, while the block runs; None where
    either is missing or results.json is not the file indexed."""
    found = _entries(root)
    if found is None:
        yield None
        return
    results, entries = found
    try:
        f = (root / RESULTS_FILE).open("rb")
    except OSError:
        yield None
        return
    with f:
        yield Lines(f, entries) if stamp_of(os.fstat(f.fileno())) == results else None
