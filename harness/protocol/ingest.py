"""Read an agent's JSON lines tolerantly into a `Series`: bad or truncated lines and a
missing `end` are problems, the rest is kept. Reading is bounded (a container's output is
untrusted), records are checked against schema 1, and the first `end` counts (the exit
code still decides a crash). `SeriesReader` is the one reader, live or `read_samples`.
Also where a scenario raised, from the end record's traceback (`frames`, `raised_at`)."""

from __future__ import annotations

import array
import binascii
import json
import math
import re
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

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
           "READ_CHUNK", "TREND_NAMES", "Frame", "Record", "RecordKind", "Series",
           "SeriesReader", "frames", "last_sample", "no_samples", "parse_lines",
           "raised_at", "read_samples", "unwrap_mallinfo"]

MAX_LINE = 1 << 20          # 1 MiB: a sample line is ~300 bytes
MAX_RECORDS = 1_000_000    # a 2000-iteration cell writes a few hundred
MAX_TOTAL = 128 << 20      # bytes read, whatever the line count (~1 GiB parsed)


# ---------------------------------------------------------------- schema 1
def valid_sample(rec: dict[str, Any]) -> str | None:
    if not isinstance(rec.get("i"), int) or isinstance(rec.get("i"), bool):
        return "sample without integer 'i'"
    if rec.get("src") not in ("step", "timer", "user"):
        return "sample with unknown 'src'"
    if not isinstance(rec.get("phase"), str):
        return "sample without 'phase'"
    for key in (*MEMORY_SOURCES, "t"):
        v = rec.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)
                              or not math.isfinite(v) or v < 0):
            return f"sample field {key!r} is not a non-negative number"
    for key in GPU_ACTIVITY_FIELDS:
        v = rec.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0
                              or (key == "gpu_util" and v > 100)):
            return f"sample {key!r} is not a non-negative integer" + (
                " up to 100" if key == "gpu_util" else "")
    if rec["src"] == "user":
        # --as-user steps: per interval their count and summed seconds.
        steps, total = rec.get("steps"), rec.get("dt_s")
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            return "sample 'steps' is not a positive integer"
        if isinstance(total, bool) or not isinstance(total, int | float) or not (
                math.isfinite(total) and total >= 0):
            return "sample 'dt_s' is not a non-negative number"
        rec["dt_s"] = float(total)
        return _timing(rec)
    if rec["src"] == "step":
        clock = rec.get("clock_s")
        if "dt_b64" in rec and (clock is None or (
                isinstance(clock, int | float) and not isinstance(clock, bool)
                and math.isfinite(clock) and clock >= 0)):
            # little-endian float64 in base64, less the clock's reads, at C speed
            dt = _float64s(rec.pop("dt_b64"), None if clock is None else float(clock))
            if dt is None:
                return "sample 'dt_b64' is not base64 of non-negative float64 seconds"
            rec["dt"] = dt
            clock = None
        elif "dt_b64" in rec:
            return "sample 'clock_s' is not a non-negative number"
        elif "dt_ns" in rec:    # whole ns (agents before it); `dt`, seconds, before those
            ns = rec.pop("dt_ns")
            if not isinstance(ns, list) or not _numbers(ns, int):
                return "sample 'dt_ns' is not a list of non-negative integers"
            rec["dt"] = list(map(_SECONDS, ns))
        else:
            dt = rec.get("dt", [])
            if not isinstance(dt, list) or not _numbers(dt):
                return "sample 'dt' is not a list of non-negative numbers"
            rec["dt"] = list(map(float, dt))
        if clock is not None:
            if isinstance(clock, bool) or not isinstance(clock, int | float) or not (
                    math.isfinite(clock) and clock >= 0):
                return "sample 'clock_s' is not a non-negative number"
            # The step times less the clock's own reads (fields.STEP), at least 1 ns.
            rec["dt"] = [t - clock if t - clock > _NS else _NS for t in rec["dt"]]
        problem = _timing(rec)
        if problem is not None:
            return problem
        cpu = rec.get("cpu")
        if cpu is not None:
            if not isinstance(cpu, list) or not all(
                    isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
                    and x >= 0 for x in cpu):
                return "sample 'cpu' is not a list of non-negative numbers"
            rec["cpu"] = [float(x) for x in cpu]
    return None


def _timing(rec: dict[str, Any]) -> str | None:
    """What a step or user sample measured of its interval (CPU, clock cost, contention),
    normalised, each non-negative (an integer where it counts); None where all are."""
    for key, integral in (("cpu_s", False), ("clock_s", False), *CONTENTION_FIELDS.items()):
        v = rec.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int | float) or not (
                math.isfinite(v) and v >= 0) or (integral and not isinstance(v, int)):
            kind = "integer" if integral else "number"
            return f"sample {key!r} is not a non-negative {kind}"
        rec[key] = v if integral else float(v)
    return None


def _numbers(values: list[Any], *kinds: type) -> bool:
    """Whether every value is a finite non-negative number of `kinds` (default int and
    float), not a bool; JSON's plain floats and ints are checked at C speed."""
    allowed = set(kinds or (float, int))
    if set(map(type, values)) <= allowed:
        return ((allowed == {int} or all(map(math.isfinite, values)))
                and (not values or min(values) >= 0))
    return not kinds and all(isinstance(x, int | float) and not isinstance(x, bool)
                             and math.isfinite(x) and x >= 0 for x in values)


_SECONDS = (1e9).__rtruediv__   # ns -> s: ns / 1e9
_NS = 1e-9


def _float64s(text: Any, clock: float | None = None) -> list[float] | None:
    """The step times of a `dt_b64` (`agent.writer.step_times`), less `clock` (at least
    1 ns); None where it is not base64 of finite non-negative float64s."""
    if not isinstance(text, str):
        return None
    try:
        raw = binascii.a2b_base64(text)
    except (binascii.Error, ValueError):
        return None
    if len(raw) % 8:
        return None
    values = array.array("d", raw)
    if sys.byteorder != "little":
        values.byteswap()
    if clock is None:
        out = values.tolist()
        # (at C speed: a NaN or an infinity makes the sum one)
        if out and not (math.isfinite(sum(out)) and min(out) >= 0):
            return None
        return out
    import numpy as np  # lazy: a sweep reaches its first container without it

    times = np.frombuffer(values, dtype=np.float64)
    if times.size and not (np.isfinite(times).all() and times.min() >= 0):
        return None
    kept: list[float] = np.maximum(times - clock, _NS).tolist()
    return kept


_STR = (str,)
_NUM = (int, float)
# Header and end fields the host reads, with the types schema 1 gives them.
HEADER_TYPES: dict[str, tuple[type, ...]] = {
    "scenario": _STR, "params": (dict,), "config": (dict,), "python": _STR,
    "implementation": _STR, "platform": _STR, "machine": _STR, "hostname": _STR,
    "pid": (int,), "time": _NUM, "env": (dict,), "packages": (dict,), "heap": (dict,),
    "pythonmalloc": _STR, "heap_mode": _STR, "cgroup": (*_STR, int), "gpu": (dict,),
    "gpu_reason": _STR, "cpu_count": (int,)}
END_TYPES: dict[str, tuple[type, ...]] = {
    "error": (dict,), "info": (dict,), "phases": (dict,), "iterations": (int,),
    "warmup": (int,), "stopped_early": (bool,), "mode": _STR, "elapsed_s": _NUM,
    "sampling_s": _NUM, "teardown_error": _STR, "collected": (dict,), "params_read": (list,),
    "output_dropped": (int,), "budget_spent": (bool,), "memory_stop": (dict,),
    "budget_capped": (bool,), "rss_hwm": (int,), "cell_s": _NUM,
    "times_s": _NUM, "sampling_own_s": _NUM, "as_user": (dict,), "queued_out_s": _NUM,
    "own_s": _NUM}


def checked(rec: dict[str, Any], types: dict[str, tuple[type, ...]], what: str,
             problems: list[str]) -> dict[str, Any]:
    """`rec` without the fields whose type schema 1 does not allow (None is allowed)."""
    out: dict[str, Any] = {}
    for key, value in rec.items():
        want = types.get(key)
        bad = want is not None and value is not None and (
            not isinstance(value, want) or (isinstance(value, bool) and bool not in want))
        if bad:
            problems.append(f"{what} field {key!r} has the wrong type; dropped")
        else:
            out[key] = value
    if what == "header":
        for key in ("env", "packages"):
            if isinstance(out.get(key), dict) and not all(
                    isinstance(v, str) for v in out[key].values()):
                problems.append(f"header field {key!r} is not a mapping of strings; dropped")
                del out[key]
        gpu = out.get("gpu")
        if gpu is not None and not (isinstance(gpu.get("devices", []), list) and all(
                isinstance(d, dict) for d in gpu.get("devices", []))):
            problems.append("header field 'gpu' has malformed devices; dropped")
            del out["gpu"]
    if what == "end" and isinstance(out.get("error"), dict):
        out["error"] = {k: v if k == "call" else str(v) for k, v in out["error"].items()
                        if k in ("type", "message", "traceback", "fault", "phase")
                        or (k == "call" and isinstance(v, int))}
    if what == "end" and out.get("status") == "error" and not isinstance(out.get("error"), dict):
        out["error"] = {"type": "error", "message": "the end record's error was malformed"}
    return out


RecordKind = Literal["header", "sample", "end"]


class Record(NamedTuple):
    """One line the reader kept: kind, line number (from 1), checked fields."""

    kind: RecordKind
    line: int
    fields: dict[str, Any]


class SeriesReader:
    """The one reader of an agent's lines: validates them, one at a time, into a Series.

    Feed lines (`feed`) or stream bytes (`feed_bytes`), then call `finish` once. It stops
    (`full`) past `MAX_RECORDS` samples or `MAX_TOTAL` bytes; a line over `MAX_LINE`
    bytes is never held whole.
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
        """Read the next bytes of the stream, yielding each record kept; lines not
        iterated over are read by the next call or `finish`."""
        self._queue.extend(self._cut(data))
        return self._read_queue()

    def _read_queue(self) -> Iterator[Record]:
        while self._queue:
            record = self.feed(self._queue.popleft())
            if record is not None:
                yield record

    def _cut(self, data: bytes) -> list[bytes]:
        """Complete lines of `data`, the first continuing the carried-over part; a line
        over MAX_LINE keeps only MAX_LINE + 1 bytes (it is skipped anyway)."""
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
        """The Series, after the rest and `unwrap_mallinfo`; later calls return it again."""
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
    """The last valid sample of a samples.jsonl being written, read from its tail."""
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


# ---------------------------------------------------------------- where a scenario raised
FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)\s*$')


@dataclass(frozen=True)
class Frame:
    path: str
    line: int
    func: str
    code: str = ""       # the source line Python printed under it, if any

    def __str__(self) -> str:
        head = f'File "{self.path}", line {self.line}, in {self.func}'
        return f"{head}: {self.code}" if self.code else head


def _agents(path: str) -> bool:
    return "/harness/agent/" in path or path.endswith(("/agent.py", "<string>"))


def frames(traceback: str) -> list[Frame]:
    """The traceback's frames, outermost first, without the agent's own."""
    lines = traceback.splitlines()
    out: list[Frame] = []
    for i, text in enumerate(lines):
        m = FRAME.match(text)
        if m is None or _agents(m.group(1)):
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        # The code line is indented under its frame; the closing "Error: message" is not.
        code = nxt.strip() if nxt.startswith("  ") and not FRAME.match(nxt) else ""
        out.append(Frame(m.group(1), int(m.group(2)), m.group(3), code))
    return out


def raised_at(traceback: str) -> str | None:
    """"loop.py:6 in step": the innermost frame outside the agent, file name only."""
    found = frames(traceback)
    if not found:
        return None
    last = found[-1]
    return f"{last.path.rsplit('/', 1)[-1]}:{last.line} in {last.func}"
