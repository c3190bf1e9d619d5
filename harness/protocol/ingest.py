"""Read an agent's JSON lines tolerantly into a `Series`: a truncated last line,
garbage lines and a missing `end` are problems, and everything readable is kept.
A cell that died mid-way is an outcome, so its evidence is kept. Reading is bounded
(what comes out of a container is untrusted), every record is checked against schema 1,
and the first `end` counts: a forged end mid-run shows as a second one, and the exit
code, which a scenario cannot forge, still decides a crash. `SeriesReader` is the one
reader of these lines, fed live (`analysis.sequential.watch_file`) or from a finished
file (`read_samples`)."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal, NamedTuple

from harness.protocol.schema import END_TYPES, HEADER_TYPES, checked, valid_sample
from harness.protocol.series import (
    CONTENTION_FIELDS,
    GPU_ACTIVITY_FIELDS,
    MEMORY_SOURCES,
    TREND_NAMES,
    Series,
    unwrap_mallinfo,
)

# The Series and the schema's names are read from here too (the protocol's one entry).
__all__ = ["CONTENTION_FIELDS", "END_TYPES", "GPU_ACTIVITY_FIELDS", "HEADER_TYPES",
           "MAX_LINE", "MAX_RECORDS", "MAX_TOTAL", "MEMORY_SOURCES", "NO_FILE",
           "READ_CHUNK", "TREND_NAMES", "Record", "RecordKind", "Series", "SeriesReader",
           "last_sample", "no_samples", "parse_lines", "read_samples", "unwrap_mallinfo"]

MAX_LINE = 1 << 20          # 1 MiB: a sample line is ~300 bytes
MAX_RECORDS = 1_000_000    # a 2000-iteration cell writes a few hundred
MAX_TOTAL = 128 << 20      # bytes read, whatever the line count (~1 GiB parsed)


RecordKind = Literal["header", "sample", "end"]


class Record(NamedTuple):
    """One line the reader kept: its kind, its line number (from 1) and its checked
    fields, the very dict the Series holds (`Series.header`, `.end`, `.samples[k]`)."""

    kind: RecordKind
    line: int
    fields: dict[str, Any]


class SeriesReader:
    """The one reader of an agent's lines: validates them, one at a time, into a Series.

    Feed it lines (`feed`) or the bytes of the stream as they arrive (`feed_bytes`,
    which cuts them into lines as `read_samples` does and carries a line cut by a
    chunk's end over to the next chunk), then call `finish` once for the Series. Live
    mode tails the file through it while the agent runs (`analysis.sequential`);
    `read_samples` reads a finished file through it: both give the same Series.
    Reading is bounded: past `MAX_RECORDS` samples or `MAX_TOTAL` bytes the next line
    stops it (`full`), and a line over `MAX_LINE` bytes is never held whole.
    """

    def __init__(self) -> None:
        self._series = Series()
        self._line = 0
        self._total = 0
        self._full = False
        self._finished = False
        self._part = bytearray()              # the stream's incomplete last line
        self._queue: deque[bytes] = deque()   # lines cut by feed_bytes, not yet read

    @property
    def full(self) -> bool:
        """True once the limits stopped reading: later lines are ignored."""
        return self._full

    def feed(self, raw: bytes) -> Record | None:
        """Read one line (with or without its newline).

        Returns:
            The record kept, or None for a blank line, a line that is a problem (it is
            described in the Series) and every line once the reader is `full`.
        """
        if self._full:
            return None
        series = self._series
        self._line += 1
        n = self._line
        if len(series.samples) >= MAX_RECORDS or self._total > MAX_TOTAL:
            series._problem(f"more than {MAX_RECORDS} records or {MAX_TOTAL >> 20} MiB; "
                            "the rest ignored")
            self._full = True
            return None
        self._total += min(len(raw), MAX_LINE + 1)
        if len(raw) > MAX_LINE:
            series._problem(f"line {n}: longer than {MAX_LINE} bytes, skipped")
            return None
        text = raw.strip()
        if not text:
            return None
        try:
            rec = json.loads(text.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            series._problem(f"line {n}: not JSON (truncated write?)")
            return None
        if not isinstance(rec, dict):
            series._problem(f"line {n}: not a JSON object")
            return None
        kind = rec.get("type")
        if kind == "header":
            if series.header is not None:
                series._problem(f"line {n}: second header ignored")
            elif rec.get("schema") != 1:
                series._problem(f"line {n}: unknown schema {rec.get('schema')!r}")
            else:
                problems: list[str] = []
                series.header = checked(rec, HEADER_TYPES, "header", problems)
                for p in problems:
                    series._problem(f"line {n}: {p}", skipped=False)
                return Record("header", n, series.header)
        elif kind == "sample":
            if series.end is not None:
                series._problem(f"line {n}: sample after end ignored")
                return None
            why = valid_sample(rec)
            if why:
                series._problem(f"line {n}: {why}")
            else:
                series.samples.append(rec)
                return Record("sample", n, rec)
        elif kind == "end":
            if series.end is not None:
                series._problem(f"line {n}: second end ignored")
            elif rec.get("status") not in ("ok", "error"):
                series._problem(f"line {n}: end with unknown status")
            else:
                problems = []
                series.end = checked(rec, END_TYPES, "end", problems)
                for p in problems:
                    series._problem(f"line {n}: {p}", skipped=False)
                return Record("end", n, series.end)
        elif kind == "where":
            series.where = rec if series.where is None else series.where
        else:
            series._problem(f"line {n}: unknown record type {kind!r}")
        return None

    def feed_bytes(self, data: bytes) -> Iterator[Record]:
        """Read the next bytes of the stream; yields each record kept as its line is read.

        The chunk is cut into lines at once; lines the caller does not iterate over are
        read by the next call or by `finish`, so no line is lost or read twice.
        """
        self._queue.extend(self._cut(data))
        return self._read_queue()

    def _read_queue(self) -> Iterator[Record]:
        while self._queue:
            record = self.feed(self._queue.popleft())
            if record is not None:
                yield record

    def _cut(self, data: bytes) -> list[bytes]:
        """Complete lines of `data`, the first continuing the carried-over part; a line
        over MAX_LINE keeps only its first MAX_LINE + 1 bytes (it is skipped anyway)."""
        out: list[bytes] = []
        limit = MAX_LINE + 1
        start, size = 0, len(data)
        while start < size:
            nl = data.find(b"\n", start)
            stop = size if nl < 0 else nl + 1
            if not self._part and nl >= 0 and stop - start <= limit:
                out.append(data[start:stop])
            else:
                room = limit - len(self._part)
                if room > 0:
                    self._part += data[start:start + min(room, stop - start)]
                if nl >= 0:
                    out.append(bytes(self._part))
                    self._part.clear()
            start = stop
        return out

    def finish(self) -> Series:
        """The Series: reads the lines not yet read and a last line without its newline,
        then undoes mallinfo's wrap (`unwrap_mallinfo`). Later calls return it again."""
        if not self._finished:
            self._finished = True
            for _ in self._read_queue():
                pass
            if self._part:
                self.feed(bytes(self._part))
                self._part.clear()
            unwrap_mallinfo(self._series)
        return self._series


def parse_lines(lines: Iterable[bytes]) -> Series:
    """Build a Series from an iterable of byte lines."""
    reader = SeriesReader()
    for raw in lines:
        reader.feed(raw)
        if reader.full:
            break
    return reader.finish()


READ_CHUNK = 1 << 16   # bytes read at a time (at most this many lines queued)
NO_FILE = "no samples file: the agent never started"


def no_samples() -> Series:
    """The Series of a cell whose agent never created its samples file."""
    series = Series()
    series._problem(NO_FILE)
    return series


def read_samples(path: Path) -> Series:
    """Read a samples.jsonl file; a missing file gives an empty Series with a problem."""
    if not path.exists():
        return no_samples()
    reader = SeriesReader()
    with path.open("rb") as f:
        while not reader.full and (chunk := f.read(READ_CHUNK)):
            for _ in reader.feed_bytes(chunk):
                pass
    return reader.finish()


def last_sample(path: Path, chunk: int = 8192) -> Record | None:
    """The last valid sample record of a samples.jsonl being written (the live display's
    progress), read from the file's tail by the same validation as the rest."""
    try:
        with path.open("rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - chunk))
            tail = f.read()
    except OSError:
        return None
    lines = tail.split(b"\n")
    if size > chunk:
        lines = lines[1:]           # the first one is cut
    for line in reversed(lines):
        if b'"sample"' not in line:
            continue
        record = SeriesReader().feed(line)
        if record is not None and record.kind == "sample":
            return record
    return None

