"""The Series: an agent's records as read (`ingest.SeriesReader` builds it), and the
views the analysis takes of it (step times, CPU times, contention, GPU activity, memory
by source). Also the names of the protocol's fields, from the agent's own list
(`harness/agent/fields.py`), and `unwrap_mallinfo`, which undoes the heap's 4 GiB wrap
across samples once reading ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
