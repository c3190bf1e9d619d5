"""The Series (an agent's records as read, built by `ingest.SeriesReader`) and the views
the analysis takes of it; the protocol's field names; `unwrap_mallinfo`."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain
from types import ModuleType
from typing import TYPE_CHECKING, Any

from harness.agent import fields

if TYPE_CHECKING:
    import numpy as np

MAX_PROBLEMS = 20
# The protocol's field names are the agent's own (harness/agent/fields.py).
MEMORY_SOURCES = tuple(key for key, _ in fields.TREND_NAMES)
# Sample key -> name of its trend in a result's `memory` (and in the report's panels).
TREND_NAMES = dict(fields.TREND_NAMES)
# Per step sample interval: contention (readers.Contention, AllThreads) and the canary;
# older recordings lack them. True means an integer count.
CONTENTION_FIELDS = dict(fields.CONTENTION)
# Per step sample where NVML answered (`readers.py:ACTIVITY_FIELDS`); each may be missing.
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
    # `cols`, with the number of samples it was taken from
    _cols: tuple[int, Columns] | None = field(default=None, init=False, repr=False,
                                              compare=False)

    def _problem(self, text: str, skipped: bool = True) -> None:
        self.skipped += skipped
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)

    @property
    def cols(self) -> Columns:
        """The measured phase as `Columns`, kept until a sample is added."""
        if self._cols is None or self._cols[0] != len(self.samples):
            self._cols = (len(self.samples), Columns(self.samples))
        return self._cols[1]

    def memory(self, source: str, phase: str = "measure") -> tuple[np.ndarray, np.ndarray]:
        """(iteration, bytes) of samples in `phase` that carry `source`, by iteration
        (`Columns.memory` holds the measured phase's)."""
        return _by_iteration(self.samples, source, phase)

    def as_user(self) -> tuple[int, float | None] | None:
        """(calls, the step's own seconds per call) under --as-user: per interval less
        clock reads and run-queue delay; the median over intervals whose delay left any
        (`own_step`: else unknown, None). None where not timed."""
        rows = [s for s in self.samples if s.get("src") == "user"]
        if not rows:
            return None
        net = [n for n in ((s["dt_s"] - s["steps"] * (s.get("clock_s") or 0.0)
                            - (s.get("rq_s") or 0.0)) / s["steps"] for s in rows) if n > 0]
        return sum(s["steps"] for s in rows), statistics.median(net) if net else None

    @property
    def measured(self) -> int:
        """Measured calls with a step time (`Columns.measured`)."""
        return self.cols.measured

    @property
    def ended(self) -> bool:
        """Whether the agent's end record (written last unless killed) was read."""
        return self.end is not None

    def params_read(self) -> list[str] | None:
        """The params keys the scenario read, per the end record; None where unsaid."""
        read = (self.end or {}).get("params_read")
        return [str(k) for k in read] if isinstance(read, list) else None


class Columns:
    """A series' measured phase as the analysis reads it, each view built on first read:
    `steps` (s per call), `cpu`, `contention` and `gpu` (per step sample; None where not
    recorded), `memory` (by source), `peaks`, `measured` (step times), `calls` (spanned)
    and `pace` (s per call from the first and last step readings' clocks)."""

    def __init__(self, samples: list[dict[str, Any]]) -> None:
        self._samples = samples[:]      # as they are now: the reader may add more

    @cached_property
    def _stepped(self) -> list[dict[str, Any]]:
        return [s for s in self._samples if s.get("src") == "step" and s.get("phase") == "measure"]

    @cached_property
    def steps(self) -> np.ndarray:
        # fromiter: at C speed, for the many times of a cheap step
        np_ = _numpy()
        out: np.ndarray = np_.fromiter(chain.from_iterable(s["dt"] for s in self._stepped),
                                       np_.float64, sum(len(s["dt"]) for s in self._stepped))
        return out

    @cached_property
    def median_step(self) -> float | None:
        """The median of `steps` on the wall clock; None without steps."""
        return float(_numpy().median(self.steps)) if len(self.steps) else None

    @cached_property
    def own_step(self) -> float | None:
        """Seconds per call that were the step's own: per interval the steps' time less the
        run-queue delay they met (a wait off the CPU stays in), per step; the median over
        intervals. `median_step` where no delay was recorded; None without steps, or
        where the delay read took every interval's time: the delay is the process's
        whole interval's (the agent's readings between steps too), so on a busy host it
        can pass the steps' own time, which is then unknown, never 0."""
        table = self.contention
        if table is None or not len(table["steps"]):
            return self.median_step
        np_ = _numpy()
        net = (table["dt_s"] - np_.nan_to_num(table["rq_s"])) / table["steps"]
        net = net[net > 0]
        return float(np_.median(net)) if len(net) else None

    @cached_property
    def cpu(self) -> np.ndarray | None:
        np_ = _numpy()
        parts: list[np.ndarray] = []
        for s in self._stepped:
            dt = s["dt"]
            if not dt:
                continue
            if "cpu" in s and len(s["cpu"]) == len(dt):    # per step (old recordings)
                parts.append(np_.asarray(s["cpu"], dtype=np_.float64))
            elif isinstance(s.get("cpu_s"), float):
                parts.append(shared(s["cpu_s"] / len(dt), dt, s.get("rq_s")))
            else:
                return None
        return np_.concatenate(parts) if parts else None

    @cached_property
    def contention(self) -> dict[str, np.ndarray] | None:
        return self._table(CONTENTION_KEYS, ("rq_s",))

    @cached_property
    def gpu(self) -> dict[str, np.ndarray] | None:
        return self._table(GPU_ACTIVITY_FIELDS, ("gpu_util", "sm_mhz"))

    def _table(self, keys: tuple[str, ...], seen: tuple[str, ...]
               ) -> dict[str, np.ndarray] | None:
        rows = [s for s in self._stepped if s["dt"]]
        if not any(s.get(k) is not None for s in rows for k in seen):
            return None
        cols = _floats([[float(len(s["dt"])), float(sum(s["dt"]))] + [
            float("nan") if s.get(k) is None else float(s[k]) for k in keys] for s in rows]
        ).reshape(-1, 2 + len(keys))
        out = {"steps": cols[:, 0], "dt_s": cols[:, 1]}
        out.update({k: cols[:, 2 + n] for n, k in enumerate(keys)})
        return out

    @cached_property
    def memory(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        return {key: _by_iteration(self._settled(key), key, "measure")
                for key in MEMORY_SOURCES}

    def _settled(self, source: str) -> list[dict[str, Any]]:
        """The samples `source`'s trend is read from (SETTLED): for RSS the measured
        step samples alone, where SETTLED_LEAST of them read it; else every sample."""
        if source in SETTLED:
            stepped = [s for s in self._stepped if s.get(source) is not None]
            if len(stepped) >= SETTLED_LEAST:
                return stepped
        return self._samples

    @cached_property
    def peaks(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for s in self._samples:
            for key in PEAK_KEYS:
                if s.get(key) is not None:
                    out[key] = max(out.get(key, -math.inf), float(s[key]))
        return out

    @cached_property
    def measured(self) -> int:
        return sum(len(s["dt"]) for s in self._stepped)

    @cached_property
    def calls(self) -> int:
        if n := self.measured:
            return n
        measured = [int(s["i"]) for s in self._samples if s.get("phase") == "measure"]
        before = [int(s["i"]) for s in self._samples if s.get("phase") != "measure"]
        return max(measured) - max(before, default=0) if measured else 0

    @cached_property
    def pace(self) -> float | None:
        clocks = [s for s in self._stepped if "t" in s and "i" in s]
        if len(clocks) < 2 or clocks[-1]["i"] <= clocks[0]["i"]:
            return None
        first, last = clocks[0], clocks[-1]
        return max(0.0, (float(last["t"]) - float(first["t"])) / (last["i"] - first["i"])) or None


# The sources a peak is read of: the trends' and anonymous RSS (the fit's first host limit).
PEAK_KEYS = (*MEMORY_SOURCES, "rss_anon")
CONTENTION_KEYS = ("rq_s", "thr_s", "ref_s", "cpu_s", "rq_all_s", "run_all_s", "on_s")


def readings(samples: list[dict[str, Any]], source: str, phase: str = "measure"
             ) -> tuple[list[float], list[float]]:
    """(iteration, bytes) of the samples in `phase` carrying `source`, as lists (no NumPy)."""
    pairs = sorted(((float(s["i"]), float(s[source])) for s in samples
                    if s.get("phase") == phase and s.get(source) is not None),
                   key=lambda p: p[0])
    return [p[0] for p in pairs], [p[1] for p in pairs]


def step_times(samples: list[dict[str, Any]]) -> list[float]:
    """The measured phase's step times in order, as a list (no NumPy)."""
    return list(map(float, chain.from_iterable(
        s["dt"] for s in samples if s.get("src") == "step" and s.get("phase") == "measure")))


# A timer sample's RSS, taken while a call runs, also holds what the allocator keeps
# free since the last trim; a step sample's is read after it. Where a phase has this many
# step readings the RSS trend is theirs; fewer, the timer's fill in.
SETTLED = ("rss",)
SETTLED_LEAST = 10


def _by_iteration(samples: list[dict[str, Any]], source: str, phase: str
                  ) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = readings(samples, source, phase)
    return _floats(xs), _floats(ys)



def shared(mean: float, dt: Sequence[float], wait: float | None = None) -> np.ndarray:
    """An interval's CPU time per step (`mean`) as one value per step, shared as the steps'
    wall times (`dt`) less `wait` (run-queue delay) share the interval's, so CPU windows
    are the same steps as wall-clock windows. A step whose CPU exceeds its wall keeps it."""
    np_ = _numpy()
    t = np_.asarray(dt, dtype=np_.float64)
    wall = float(t.sum())
    cpu = mean * t.size
    total = wall - (wait or 0.0)
    if cpu <= wall:
        total = max(total, cpu)
    out: np.ndarray = t * (cpu / total) if total > 0 else np_.full(t.size, mean)
    return out


def _numpy() -> ModuleType:
    """NumPy, imported with the first columns built."""
    # lazy: NumPy with the first columns, never before a sweep's first container
    import numpy

    return numpy


def _floats(values: Sequence[float] | Sequence[Sequence[float]]) -> np.ndarray:
    out: np.ndarray = _numpy().asarray(values, dtype=_numpy().float64)
    return out


WRAP = 1 << 32


def unwrap_mallinfo(series: Series) -> int:
    """Undo the 4 GiB wrap of glibc < 2.33's mallinfo() across samples (a jump over 2 GiB
    between neighbours is a wrap); returns the wraps, noted in `series.notes`."""
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
    series._cols = None     # the heap's values changed under the columns taken
    if wraps:
        series.notes.append(f"heap: glibc < 2.33 has only mallinfo(), which wraps at 4 GiB; "
                            f"{wraps} wrap(s) unwrapped across samples")
    elif prev is not None and prev >= WRAP / 2:
        series.notes.append("heap: glibc < 2.33 has only mallinfo(), which wraps at 4 GiB; "
                            "the heap passed 2 GiB, so a wrap between two samples cannot "
                            "be ruled out")
    return wraps
