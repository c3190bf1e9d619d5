"""The Series: an agent's records as read (`ingest.SeriesReader` builds it), and the
views the analysis takes of it (step times, CPU times, contention, GPU activity, memory
by source). Also the names of the protocol's fields, from the agent's own list
(`harness/agent/fields.py`), and `unwrap_mallinfo`, which undoes the heap's 4 GiB wrap
across samples once reading ends.
"""

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
# Per sample interval, on step samples (agents from issue 12 on): the stepping thread's
# run-queue delay (s) and involuntary context switches, the cgroup's throttled time (s)
# and throttled periods, the run-queue delay and run time of all the process's threads
# (`rq_all_s`, `run_all_s`), the stepping thread's time on a CPU (`on_s`), and `ref_s`,
# the time of a fixed canary loop (CPU speed).
# Older recordings lack them; True means an integer count.
CONTENTION_FIELDS = dict(fields.CONTENTION)
# Per step sample where NVML answered (agents from issue 20 on; the agent's list is
# `harness/agent/readers.py:ACTIVITY_FIELDS`): the device's utilization in percent (share
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
    # `cols`, with the number of samples it was taken from
    _cols: tuple[int, Columns] | None = field(default=None, init=False, repr=False,
                                              compare=False)

    def _problem(self, text: str, skipped: bool = True) -> None:
        self.skipped += skipped
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)

    @property
    def cols(self) -> Columns:
        """The measured phase as arrays (`Columns`), each read once and kept until a
        sample is added (the live decider adds them as it reads)."""
        if self._cols is None or self._cols[0] != len(self.samples):
            self._cols = (len(self.samples), Columns(self.samples))
        return self._cols[1]

    def memory(self, source: str, phase: str = "measure") -> tuple[np.ndarray, np.ndarray]:
        """(iteration, bytes) of samples in `phase` that carry `source`, by iteration
        (`Columns.memory` holds the measured phase's)."""
        return _by_iteration(self.samples, source, phase)

    def as_user(self) -> tuple[int, float] | None:
        """(calls, the step's own seconds per call) as the user's interpreter runs it:
        the steps the agent timed again so (--as-user, its user samples), each
        interval's summed time less the clock's reads and the run-queue delay in it, per
        step, the median over the intervals; None where the run did not time them."""
        rows = [s for s in self.samples if s.get("src") == "user"]
        if not rows:
            return None
        net = [max(0.0, s["dt_s"] - s["steps"] * (s.get("clock_s") or 0.0)
                   - (s.get("rq_s") or 0.0)) / s["steps"] for s in rows]
        return sum(s["steps"] for s in rows), statistics.median(net)

    @property
    def measured(self) -> int:
        """Measured calls with a step time (`Columns.measured`)."""
        return self.cols.measured

    @property
    def ended(self) -> bool:
        """The agent's end record was read (it writes it last, however the run ends,
        unless it is killed)."""
        return self.end is not None

    def params_read(self) -> list[str] | None:
        """The keys of params the scenario read, as the end record says (a run of
        setup(params)); None where it does not say (killed, a plain script, an agent
        from before `params_read`)."""
        read = (self.end or {}).get("params_read")
        return [str(k) for k in read] if isinstance(read, list) else None


class Columns:
    """A series' measured phase as the analysis reads it: each view built the first
    time it is read, from the samples there were when the columns were taken.

    `steps`: seconds per measured call, in order. `cpu`: process CPU seconds per call
    (the agent's `cpu_s` is a sample interval's mean per step; older recordings carry a
    per-step `cpu` list), None where a step sample lacks it. `contention`: per measured
    step sample, `steps`, `dt_s` (their summed step time) and each of `CONTENTION_KEYS`
    (NaN where a sample lacks it), None when no sample recorded run-queue delay (an agent
    older than the contention counters). `gpu`: the same for `GPU_ACTIVITY_FIELDS`, None
    when no sample recorded the GPU's utilization or SM clock. `memory`: (iteration,
    bytes) by source, timer samples too (USS is read mostly by the timer thread).
    `peaks`: each of `PEAK_KEYS`' highest value in any phase. `measured`: the step times'
    count. `calls`: the measured calls the samples span (`measured`, or where samples
    carry no step times, hand-built records, the last measured call less the warm-up's
    last). `pace`: seconds per
    measured call, from the first and last step readings' clocks (None where they do not
    say)."""

    def __init__(self, samples: list[dict[str, Any]]) -> None:
        self._samples = samples[:]      # as they are now: the reader may add more

    @cached_property
    def _stepped(self) -> list[dict[str, Any]]:
        return [s for s in self._samples if s.get("src") == "step" and s.get("phase") == "measure"]

    @cached_property
    def steps(self) -> np.ndarray:
        # at C speed: a list comprehension of a trivial step's ~500,000 times took 17 ms
        np_ = _numpy()
        out: np.ndarray = np_.fromiter(chain.from_iterable(s["dt"] for s in self._stepped),
                                       np_.float64, sum(len(s["dt"]) for s in self._stepped))
        return out

    @cached_property
    def median_step(self) -> float | None:
        """The median of `steps` (None where no step was timed): the wall clock's, a
        busy host's waits for a CPU in it."""
        return float(_numpy().median(self.steps)) if len(self.steps) else None

    @cached_property
    def own_step(self) -> float | None:
        """Seconds per call that were the step's own: per sample interval, its steps'
        time less the run-queue delay they met (the agent's `rq_s`), per step; the
        median over the intervals. A wait off the CPU (a device, a worker, I/O) is the
        step's and stays in it; a wait for a CPU the host's other work held is not (a
        clean pair at a load of ~11 read 10.5 and 4.39 ms/call on the wall clock, 1.7-2.1
        ms by hand). The rounds' statistic is the same (`analysis.run_stat`). The wall
        clock's median (`median_step`) where the agent recorded no delay; None where no
        step was timed."""
        table = self.contention
        if table is None or not len(table["steps"]):
            return self.median_step
        np_ = _numpy()
        net = (table["dt_s"] - np_.nan_to_num(table["rq_s"])) / table["steps"]
        return float(np_.median(np_.maximum(net, 0.0)))

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
    """(iteration, bytes) of the samples in `phase` that carry `source`, by iteration, as
    lists: what `Columns.memory` holds as arrays, for a reader that needs no NumPy (the
    report's plots)."""
    pairs = sorted(((float(s["i"]), float(s[source])) for s in samples
                    if s.get("phase") == phase and s.get(source) is not None),
                   key=lambda p: p[0])
    return [p[0] for p in pairs], [p[1] for p in pairs]


def step_times(samples: list[dict[str, Any]]) -> list[float]:
    """The measured phase's step times in order, as a list: what `Columns.steps` holds as
    an array, for a reader that needs no NumPy (the report's plots)."""
    return [float(t) for s in samples if s.get("src") == "step" and s.get("phase") == "measure"
            for t in s["dt"]]


# The RSS a step sample stamps is read after the heap reading's malloc_trim(0), between
# calls; a timer sample's, while a call runs, holds what the allocator keeps free since
# the last trim too (with the calls between two samples: +1.0-1.7 MiB of a cheap step
# whose samples a busy host spaced out, a `plateau` in one run of two of boltons' suite
# at load 8-14). Where a phase has this many step readings, the RSS trend is theirs;
# fewer (a step of seconds), the timer's readings fill in.
SETTLED = ("rss",)
SETTLED_LEAST = 10


def _by_iteration(samples: list[dict[str, Any]], source: str, phase: str
                  ) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = readings(samples, source, phase)
    return _floats(xs), _floats(ys)



def shared(mean: float, dt: Sequence[float], wait: float | None = None) -> np.ndarray:
    """An interval's CPU time per step (`mean`, the agent's `cpu_s` over its steps) as one
    value per step: shared among its steps as their wall times (`dt`) share the
    interval's, less `wait`, its run-queue delay (the agent's `rq_s`). Windows of these
    (a share of the run's steps, `step_window`) are windows of the same steps as the wall
    clock's, not of the samples, which a budgeted run spaces in time (a step slowing 7.4x
    over its run read 2.8x in CPU time: its first quarter of samples held half its
    steps). A pure-CPU step reads its own times; a step that waits (a sleep, a device)
    reads them scaled down by its CPU share; a busy host's wait for a CPU, in a few
    steps' wall times, is left out of what is shared (it would scale every other step's
    CPU time down). Leaving the wait out never lifts the steps' CPU time past their
    wall time where, with it in, it was under it: the agent's `rq_s` is the steps' share
    of the interval's delay, and where the delay fell outside the steps (a loaded CI
    host, most of the wall a wait) that share read a step's CPU time 1.3x its wall time.
    A step whose threads run on several CPUs (its CPU time past its wall time with the
    wait in) keeps its own figure."""
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
    """NumPy, imported with the first columns built: a sweep reaches its first container
    without it (the prefetch thread imports it meanwhile)."""
    # lazy: NumPy with the first columns, never before a sweep's first container
    import numpy

    return numpy


def _floats(values: Sequence[float] | Sequence[Sequence[float]]) -> np.ndarray:
    out: np.ndarray = _numpy().asarray(values, dtype=_numpy().float64)
    return out


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
    series._cols = None     # the heap's values changed under the columns taken
    if wraps:
        series.notes.append(f"heap: glibc < 2.33 has only mallinfo(), which wraps at 4 GiB; "
                            f"{wraps} wrap(s) unwrapped across samples")
    elif prev is not None and prev >= WRAP / 2:
        series.notes.append("heap: glibc < 2.33 has only mallinfo(), which wraps at 4 GiB; "
                            "the heap passed 2 GiB, so a wrap between two samples cannot "
                            "be ruled out")
    return wraps
