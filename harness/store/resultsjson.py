"""results.json's cells: each one's line copied from its result.json as written, never
the object read held beside its result (10,000 of them took 120 MB) nor its text (50 MB):
`harness report` reads the file again when it writes results.json, where it is still the
one read (its `Stamp`)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from harness.result.codec import JSON, parse

# A result.json as read: its size, mtime (ns) and inode (written again, by the store's
# atomic writes or by hand, it is a new inode or a new time).
Stamp = tuple[int, int, int]


def stamp_of(st: os.stat_result) -> Stamp:
    """A file's `Stamp`, from its `os.stat`."""
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def results_line(data: Mapping[str, JSON]) -> str:
    """A cell's result.json object as results.json holds it: one line, keys sorted,
    without host samples."""
    kept: dict[str, JSON] = {k: v for k, v in data.items() if k != "host_samples"}
    return json.dumps(kept, sort_keys=True, default=str)


_NO_HOST_SAMPLES = b'\n "host_samples": [],\n'
_INDENT = re.compile(rb"\n *")


def as_written(raw: bytes) -> str | None:
    """`results_line` of a result.json as `write_json` wrote it (indented by one, keys
    sorted, no host samples), made from its bytes: its line breaks and indents taken out
    (JSON strings hold none), ", " where a line ended in ","; a fifth of the time of
    encoding the object again. None for a file written otherwise (`results_line` then)."""
    if (not raw.startswith(b'{\n "') or raw.count(_NO_HOST_SAMPLES) != 1
            or not raw.isascii()):
        return None
    body = raw.replace(_NO_HOST_SAMPLES, b"\n").replace(b",\n", b", \n")
    return _INDENT.sub(b"", body).decode("ascii", "replace")


def results_line_of(root: Path, cell_id: str, stamp: Stamp) -> str | None:
    """The cell's line of results.json from its result.json, where the file is still
    the one read (`Cells.stored`); None where it changed or is gone since."""
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
    """Whether the file `path` holds exactly the text `parts` make (read a part at a
    time; False where it cannot be read)."""
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
