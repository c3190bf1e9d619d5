"""Read an agent's JSON lines tolerantly into a `Series`.

A cell that died mid-way is an outcome, so a truncated last line, garbage lines and a
missing `end` are recorded as problems and everything readable is kept. What comes out
of a container is untrusted: reading is bounded (over-long lines are skipped without
being held whole in memory, and the total bytes and records kept are capped), every
record is checked against schema 1 (fields of the wrong type are dropped with a
problem). The first `end` counts; anything after it is a problem (the agent writes its
`end` last, so a forged end mid-run shows as a "second end" and the exit code, which a
scenario cannot forge, still decides a crash).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

MAX_LINE = 1 << 20          # 1 MiB: a sample line is ~300 bytes
MAX_RECORDS = 1_000_000    # a 2000-iteration cell writes a few hundred
MAX_TOTAL = 128 << 20      # bytes read, whatever the line count (~1 GiB parsed)
MAX_PROBLEMS = 20
MEMORY_SOURCES = ("heap", "uss", "rss", "cgroup", "gpu_used", "fw")
# Sample key -> name of its trend in a result's `memory` (and in the report's panels).
TREND_NAMES = {"heap": "heap", "uss": "uss", "rss": "rss", "cgroup": "cgroup",
               "gpu_used": "gpu", "fw": "fw"}
# Per sample interval, on step samples (agents from issue 12 on): the stepping thread's
# run-queue delay (s) and involuntary context switches, the cgroup's throttled time (s)
# and throttled periods, the run-queue delay and run time of all the process's threads
# (`rq_all_s`, `run_all_s`), the stepping thread's time on a CPU (`on_s`), and `ref_s`,
# the time of a fixed canary loop (CPU speed).
# Older recordings lack them; True means an integer count.
CONTENTION_FIELDS = {"rq_s": False, "ivcs": True, "thr_s": False, "thr_n": True,
                     "ref_s": False, "rq_all_s": False, "run_all_s": False, "on_s": False}


@dataclass
class Series:
    header: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    samples: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    skipped: int = 0
    notes: list[str] = field(default_factory=list)   # what reading changed, for the reader

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


def parse_lines(lines: Any) -> Series:
    """Build a Series from an iterable of byte lines."""
    series = Series()
    total = 0
    for n, raw in enumerate(lines, 1):
        if len(series.samples) >= MAX_RECORDS or total > MAX_TOTAL:
            series._problem(f"more than {MAX_RECORDS} records or {MAX_TOTAL >> 20} MiB; "
                            "the rest ignored")
            break
        total += min(len(raw), MAX_LINE + 1)
        if len(raw) > MAX_LINE:
            series._problem(f"line {n}: longer than {MAX_LINE} bytes, skipped")
            continue
        text = raw.strip()
        if not text:
            continue
        try:
            rec = json.loads(text.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            series._problem(f"line {n}: not JSON (truncated write?)")
            continue
        if not isinstance(rec, dict):
            series._problem(f"line {n}: not a JSON object")
            continue
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
        elif kind == "sample":
            if series.end is not None:
                series._problem(f"line {n}: sample after end ignored")
                continue
            why = _valid_sample(rec)
            if why:
                series._problem(f"line {n}: {why}")
            else:
                series.samples.append(rec)
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
        else:
            series._problem(f"line {n}: unknown record type {kind!r}")
    unwrap_mallinfo(series)
    return series


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


def _bounded_lines(path: Path) -> Any:
    """Yield lines, cutting any line over MAX_LINE so memory stays bounded."""
    with path.open("rb") as f:
        while True:
            line = f.readline(MAX_LINE + 1)
            if not line:
                return
            if len(line) > MAX_LINE and not line.endswith(b"\n"):
                while True:  # drain the rest of the monster line
                    more = f.readline(MAX_LINE)
                    if not more or more.endswith(b"\n"):
                        break
            yield line


def read_samples(path: Path) -> Series:
    """Read a samples.jsonl file; a missing file gives an empty Series with a problem."""
    if not path.exists():
        series = Series()
        series._problem("no samples file: the agent never started")
        return series
    return parse_lines(_bounded_lines(path))
