"""results.json's cells, each a copy of its result.json's text while its `Stamp` holds, and
results.index (per cell that stamp, the line's place and CRC-32), so `read_cells` reads one
open file where all agree (`Lines.result`), else result.json.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import msgspec

from harness.result.codec import JSON, parse
from harness.result.model import SCHEMA, CellResult

# A result.json as read: size, mtime (ns), inode; a rewrite changes the inode or time.
Stamp = tuple[int, int, int]


def stamp_of(st: os.stat_result) -> Stamp:
    """A file's `Stamp`, from its `os.stat`."""
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def results_line(data: Mapping[str, JSON]) -> str:
    """A cell's result.json object as results.json holds it: one line, keys sorted."""
    kept: dict[str, JSON] = {k: v for k, v in data.items() if k != "host_samples"}
    return json.dumps(kept, sort_keys=True, default=str)


_NO_HOST_SAMPLES = b'\n "host_samples": [],\n'
_INDENT = re.compile(rb"\n *")


def as_written(raw: bytes) -> str | None:
    """`results_line` from the bytes `write_json` wrote (faster than encoding), or None."""
    if (not raw.startswith(b'{\n "') or raw.count(_NO_HOST_SAMPLES) != 1
            or not raw.isascii()):
        return None
    body = raw.replace(_NO_HOST_SAMPLES, b"\n").replace(b",\n", b", \n")
    return _INDENT.sub(b"", body).decode("ascii", "replace")


def results_line_of(root: Path, cell_id: str, stamp: Stamp) -> str | None:
    """The cell's results.json line from its result.json if still the one read, else None."""
    path = root / "cells" / cell_id / "result.json"
    try:
        with path.open("rb") as f:
            if stamp_of(os.fstat(f.fileno())) != stamp:
                return None
            raw = f.read()
        line = as_written(raw)
        data = parse(raw) if line is None else None
    except (OSError, ValueError):
        return None
    if line is not None:
        return line
    return results_line(data) if isinstance(data, dict) else None


def holds(path: Path, parts: Iterable[str]) -> bool:
    """Whether the file `path` holds exactly the text `parts` make (False if unreadable)."""
    try:
        with path.open("rb") as f:
            for part in parts:
                for at in range(0, len(part), _CHUNK):  # a part of 8 MB not held twice
                    data = part[at:at + _CHUNK].encode("utf-8")
                    if f.read(len(data)) != data:
                        return False
            return f.read(1) == b""
    except OSError:
        return False


_CHUNK = 1 << 20


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
    """The index of a results.json (its stamp `results`) whose cells' lines are at `entries`."""
    index = _Index(VERSION, SCHEMA, results, {
        cid: (*stamp, offset, length, crc)
        for cid, (stamp, offset, length, crc) in sorted(entries.items())})
    return msgspec.json.encode(index).decode("utf-8") + "\n"


def _entries(root: Path) -> tuple[Stamp, dict[str, Entry]] | None:
    """The index in `root` (results.json's stamp and the cells' entries), or None. A cell
    whose result.json is not older than the index is left out: a same-size rewrite within
    one clock tick would keep its stamp (git's "racy" case)."""
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
    """An open results.json and its index: lines of cells whose result.json is unchanged."""

    def __init__(self, f: IO[bytes], entries: dict[str, Entry]):
        self._fd = f.fileno()
        self._entries = entries

    def line(self, cell_id: str, stamp: Stamp) -> bytes | None:
        """The cell's line where its stamp and the line's bytes are the indexed ones, else None."""
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
        """The cell's result strictly decoded from its line, and its stamp; else None."""
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
    """`root`'s results.json with its index, open while the block runs; None where stale."""
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
