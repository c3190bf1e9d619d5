"""Read an agent's JSON lines tolerantly into a `Series`.

A cell that died mid-way is an outcome, so a truncated last line, garbage lines and a
missing `end` are recorded as problems and everything readable is kept. Reading is
bounded: over-long lines are skipped without being held whole in memory.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

MAX_LINE = 1 << 20          # 1 MiB: a sample line is ~300 bytes
MAX_RECORDS = 5_000_000
MAX_PROBLEMS = 20
MEMORY_SOURCES = ("heap", "uss", "rss", "cgroup", "gpu_used", "fw")


@dataclass
class Series:
    header: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    samples: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    skipped: int = 0

    def _problem(self, text: str) -> None:
        self.skipped += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)

    def step_times(self) -> np.ndarray:
        """Per-iteration seconds of the measured phase, in order."""
        out: list[float] = []
        for s in self.samples:
            if s.get("src") == "step" and s.get("phase") == "measure":
                out.extend(s["dt"])
        return np.asarray(out, dtype=np.float64)

    def cpu_times(self) -> np.ndarray | None:
        """Per-iteration process CPU seconds of the measured phase, or None if not recorded."""
        out: list[float] = []
        for s in self.samples:
            if s.get("src") == "step" and s.get("phase") == "measure":
                cpu = s.get("cpu")
                if cpu is None or len(cpu) != len(s["dt"]):
                    return None
                out.extend(cpu)
        return np.asarray(out, dtype=np.float64) if out else None

    def memory(self, source: str, phase: str = "measure") -> tuple[np.ndarray, np.ndarray]:
        """(iteration, bytes) of samples in `phase` that carry `source`, by iteration.

        Timer samples count too (they carry the iteration reached when taken): USS is
        read mostly by the timer thread.
        """
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
        cpu = rec.get("cpu")
        if cpu is not None:
            if not isinstance(cpu, list) or not all(
                    isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
                    and x >= 0 for x in cpu):
                return "sample 'cpu' is not a list of non-negative numbers"
            rec["cpu"] = [float(x) for x in cpu]
    return None


def parse_lines(lines: Any) -> Series:
    """Build a Series from an iterable of byte lines."""
    series = Series()
    for n, raw in enumerate(lines, 1):
        if len(series.samples) >= MAX_RECORDS:
            series._problem(f"more than {MAX_RECORDS} records; the rest ignored")
            break
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
                series.header = rec
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
                series.end = rec
        else:
            series._problem(f"line {n}: unknown record type {kind!r}")
    return series


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
