"""Read an agent's JSON lines tolerantly into a `Series`.

A cell that died mid-way is an outcome, so a truncated last line, garbage lines and a
missing `end` are recorded as problems and everything readable is kept. What comes out
of a container is untrusted: reading is bounded (over-long lines are skipped without
being held whole in memory, and the total bytes and records kept are capped), every
record is checked against schema 1 (fields of the wrong type are dropped with a
problem). The first `end` counts; anything after it is a problem (the agent writes its
`end` last, so a forged end mid-run shows as a "second end" and the exit code, which a
scenario cannot forge, still decides a crash).

`SeriesReader` is the one reader of these lines: live mode feeds it the file's bytes as
the agent writes them (`analysis.sequential.watch_file`), `read_samples` a finished file;
a cell's samples are parsed once, by whichever of the two ran.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from harness.agent import fields

if TYPE_CHECKING:
    import numpy as np

MAX_LINE = 1 << 20          # 1 MiB: a sample line is ~300 bytes
MAX_RECORDS = 1_000_000    # a 2000-iteration cell writes a few hundred
MAX_TOTAL = 128 << 20      # bytes read, whatever the line count (~1 GiB parsed)
MAX_PROBLEMS = 20
# The protocol's field names are the agent's own (harness/agent/fields.py).
MEMORY_SOURCES = tuple(key for key, _ in fields.TREND_NAMES)
# Sample key -> name of its trend in a result's `memory` (and in the report's panels).
TREND_NAMES = dict(fields.TREND_NAMES)
# Per sample interval, on step samples (agents from issue 12 on): the stepping thread's
# run-queue delay (s) and involuntary context switches, the cgroup's throttled time (s)
# and throttled periods, the run-queue delay and run time of all the process's threads
# (`rq_all_s`, `run_all_s`), the stepping thread's time on a CPU (`on_s`), and `ref_s`,
# the time of a fixed canary loop (CPU speed).
# Older recordings lack them; True means an integer count.
CONTENTION_FIELDS = dict(fields.CONTENTION)
# Per step sample where NVML answered (agents from issue 20 on; the agent's list is
# `harness/agent/nvml.py:ACTIVITY_FIELDS`): the device's utilization in percent (share
# of NVML's last sample period in which a kernel ran), its SM clock in MHz and the
# clock-event reasons bitmask. Each may be missing (an old driver, a GPU that does not
# support it, an older recording); all are non-negative integers.
GPU_ACTIVITY_FIELDS: tuple[str, ...] = fields.GPU_ACTIVITY


@dataclass
class Series:
    header: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    samples: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    skipped: int = 0
    notes: list[str] = field(default_factory=list)   # what reading changed, for the reader
    where: dict[str, Any] | None = None   # the agent's --attribute record (fields.WHERE)

    def _problem(self, text: str, skipped: bool = True) -> None:
        self.skipped += skipped
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)

    def step_times(self) -> np.ndarray:
        """Per-iteration seconds of the measured phase, in order."""
        import numpy as np

        out: list[float] = []
        for s in self.samples:
            if s.get("src") == "step" and s.get("phase") == "measure":
                out.extend(s["dt"])
        return np.asarray(out, dtype=np.float64)

    def cpu_times(self) -> np.ndarray | None:
        """Process CPU seconds per iteration in the measured phase, or None if not recorded.

        The agent records CPU time per sample interval (`cpu_s`, one value per sample:
        the interval's mean per step); older recordings carry a per-step `cpu` list.
        """
        import numpy as np

        out: list[float] = []
        for s in self.samples:
            if s.get("src") == "step" and s.get("phase") == "measure" and s["dt"]:
                if "cpu" in s and len(s["cpu"]) == len(s["dt"]):
                    out.extend(s["cpu"])
                elif isinstance(s.get("cpu_s"), float):
                    out.append(s["cpu_s"] / len(s["dt"]))
                else:
                    return None
        return np.asarray(out, dtype=np.float64) if out else None

    def contention(self) -> dict[str, np.ndarray] | None:
        """Per measured step sample: `steps`, `dt_s` (their summed step time), `rq_s`,
        `thr_s`, `ref_s` and `cpu_s` (NaN where a sample lacks it); None when no sample
        recorded run-queue delay (an agent older than the contention counters)."""
        import numpy as np

        keys = ("rq_s", "thr_s", "ref_s", "cpu_s", "rq_all_s", "run_all_s", "on_s")
        rows: list[list[float]] = []
        seen = False
        for s in self.samples:
            if s.get("src") == "step" and s.get("phase") == "measure" and s["dt"]:
                seen = seen or s.get("rq_s") is not None
                rows.append([float(len(s["dt"])), float(sum(s["dt"]))] + [
                    float("nan") if s.get(k) is None else float(s[k]) for k in keys])
        if not seen:
            return None
        cols = np.asarray(rows, dtype=np.float64).reshape(-1, 2 + len(keys))
        out = {"steps": cols[:, 0], "dt_s": cols[:, 1]}
        out.update({k: cols[:, 2 + n] for n, k in enumerate(keys)})
        return out

    def gpu_activity(self) -> dict[str, np.ndarray] | None:
        """Per measured step sample: `steps`, `dt_s` (their summed step time),
        `gpu_util` (percent), `sm_mhz` and `clk_reasons` (NaN where a sample lacks it);
        None when no sample recorded the GPU's utilization or SM clock (no NVML, an
        old driver, a recording from before issue 20)."""
        import numpy as np

        rows: list[list[float]] = []
        seen = False
        for s in self.samples:
            if s.get("src") == "step" and s.get("phase") == "measure" and s["dt"]:
                seen = seen or s.get("gpu_util") is not None or s.get("sm_mhz") is not None
                rows.append([float(len(s["dt"])), float(sum(s["dt"]))] + [
                    float("nan") if s.get(k) is None else float(s[k])
                    for k in GPU_ACTIVITY_FIELDS])
        if not seen:
            return None
        cols = np.asarray(rows, dtype=np.float64).reshape(-1, 2 + len(GPU_ACTIVITY_FIELDS))
        out = {"steps": cols[:, 0], "dt_s": cols[:, 1]}
        out.update({k: cols[:, 2 + n] for n, k in enumerate(GPU_ACTIVITY_FIELDS)})
        return out

    def memory(self, source: str, phase: str = "measure") -> tuple[np.ndarray, np.ndarray]:
        """(iteration, bytes) of samples in `phase` that carry `source`, by iteration.

        Timer samples count too (they carry the iteration reached when taken): USS is
        read mostly by the timer thread.
        """
        import numpy as np

        pairs: list[tuple[float, float]] = []
        for s in self.samples:
            v = s.get(source)
            if s.get("phase") == phase and v is not None:
                pairs.append((float(s["i"]), float(v)))
        pairs.sort(key=lambda p: p[0])
        xs = [p[0] for p in pairs]
        ys = [p[1] for p in pairs]
        return np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.float64)

    def peak(self, source: str) -> float | None:
        values = [float(s[source]) for s in self.samples if s.get(source) is not None]
        return max(values) if values else None

    @property
    def measured(self) -> int:
        return sum(len(s["dt"]) for s in self.samples
                   if s.get("src") == "step" and s.get("phase") == "measure")


def _valid_sample(rec: dict[str, Any]) -> str | None:
    if not isinstance(rec.get("i"), int) or isinstance(rec.get("i"), bool):
        return "sample without integer 'i'"
    if rec.get("src") not in ("step", "timer"):
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
    if rec["src"] == "step":
        dt = rec.get("dt", [])
        if not isinstance(dt, list) or not all(
                isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
                and x >= 0 for x in dt):
            return "sample 'dt' is not a list of non-negative numbers"
        rec["dt"] = [float(x) for x in dt]
        cpu_s = rec.get("cpu_s")
        if cpu_s is not None:
            if isinstance(cpu_s, bool) or not isinstance(cpu_s, int | float) or not (
                    math.isfinite(cpu_s) and cpu_s >= 0):
                return "sample 'cpu_s' is not a non-negative number"
            rec["cpu_s"] = float(cpu_s)
        for key, integral in CONTENTION_FIELDS.items():
            v = rec.get(key)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int | float) or not (
                    math.isfinite(v) and v >= 0) or (integral and not isinstance(v, int)):
                kind = "integer" if integral else "number"
                return f"sample {key!r} is not a non-negative {kind}"
            rec[key] = v if integral else float(v)
        cpu = rec.get("cpu")
        if cpu is not None:
            if not isinstance(cpu, list) or not all(
                    isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
                    and x >= 0 for x in cpu):
                return "sample 'cpu' is not a list of non-negative numbers"
            rec["cpu"] = [float(x) for x in cpu]
    return None


_STR = (str,)
_NUM = (int, float)
# Header and end fields the host reads, with the types schema 1 gives them.
HEADER_TYPES: dict[str, tuple[type, ...]] = {
    "scenario": _STR, "params": (dict,), "config": (dict,), "python": _STR,
    "implementation": _STR, "platform": _STR, "machine": _STR, "hostname": _STR,
    "pid": (int,), "time": _NUM, "env": (dict,), "packages": (dict,), "heap": (dict,),
    "pythonmalloc": _STR, "cgroup": (*_STR, int), "gpu": (dict,), "gpu_reason": _STR,
    "cpu_count": (int,)}
END_TYPES: dict[str, tuple[type, ...]] = {
    "error": (dict,), "info": (dict,), "phases": (dict,), "iterations": (int,),
    "warmup": (int,), "stopped_early": (bool,), "mode": _STR, "elapsed_s": _NUM,
    "sampling_s": _NUM, "teardown_error": _STR}


def _checked(rec: dict[str, Any], types: dict[str, tuple[type, ...]], what: str,
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
        out["error"] = {k: str(v) for k, v in out["error"].items()
                        if k in ("type", "message", "traceback")}
    if what == "end" and out.get("status") == "error" and not isinstance(out.get("error"), dict):
        out["error"] = {"type": "error", "message": "the end record's error was malformed"}
    return out


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
                series.header = _checked(rec, HEADER_TYPES, "header", problems)
                for p in problems:
                    series._problem(f"line {n}: {p}", skipped=False)
                return Record("header", n, series.header)
        elif kind == "sample":
            if series.end is not None:
                series._problem(f"line {n}: sample after end ignored")
                return None
            why = _valid_sample(rec)
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
                series.end = _checked(rec, END_TYPES, "end", problems)
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


WRAP = 1 << 32


def unwrap_mallinfo(series: Series) -> int:
    """Undo the 4 GiB wrap of glibc < 2.33's mallinfo() across samples; count the wraps.

    Without mallinfo2 the agent reads mallinfo(), whose int fields wrap (the agent keeps
    the low 32 bits). Samples are ~10 iterations apart, so a jump of more than 2 GiB
    between neighbours is a wrap, not an allocation: each one moves the rest by 4 GiB.
    Says so in `series.notes` (the console and the report show it with the verdict).
    """
    heap = (series.header or {}).get("heap") or {}
    if heap.get("func") != "mallinfo":
        return 0
    offset = 0
    prev: float | None = None
    wraps = 0
    for s in series.samples:
        v = s.get("heap")
        if v is None:
            continue
        value = float(v) + offset
        if prev is not None and value < prev - WRAP / 2:
            offset += WRAP
            value += WRAP
            wraps += 1
        elif prev is not None and value > prev + WRAP / 2 and offset >= WRAP:
            offset -= WRAP
            value -= WRAP
            wraps += 1
        s["heap"] = value
        prev = value
    if wraps:
        series.notes.append(f"heap: glibc < 2.33 has only mallinfo(), which wraps at 4 GiB; "
                            f"{wraps} wrap(s) unwrapped across samples")
    elif prev is not None and prev >= WRAP / 2:
        series.notes.append("heap: glibc < 2.33 has only mallinfo(), which wraps at 4 GiB; "
                            "the heap passed 2 GiB, so a wrap between two samples cannot "
                            "be ruled out")
    return wraps


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

