"""Memory per unit of a param: peak = fixed + per_unit * value, and the value at a limit.

Pure: the peaks come in as numbers (`harness.fit.plan` reads them from each fitting
probe's samples). A least-squares line through (value, peak) splits a run's memory into
what it holds whatever the value (framework, weights, libraries) and what each unit adds
(a sample's activations); where that line meets the memory limit is the predicted
largest value that fits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.analysis.records import size
from harness.protocol.series import Series
from harness.runtimes.base import own_cgroup

# Sample keys of the memory sources, with the names the results use. `gpu` is the
# device as NVML sees it, `fw` the framework allocator, the others the process / its
# cgroup on the host: the cell's only where its runtime gave it a cgroup of its own
# (`runtimes.base.own_cgroup`); elsewhere the agent's reading is the whole session's or
# machine's, kept in the samples, never fitted as the cell's.
SOURCES: dict[str, str] = {"gpu_used": "gpu", "fw": "fw", "rss": "rss", "rss_anon": "rss_anon",
                           "uss": "uss", "heap": "heap", "cgroup": "cgroup"}
DEVICE = ("fw", "gpu")            # limited by the GPU's memory
HOST = ("rss_anon", "rss")        # limited by the cell's mem_limit (anonymous memory first:
                                  # file pages of shared libraries are reclaimable)
MiB = 1 << 20


@dataclass(frozen=True)
class Line:
    """peak = fixed + per_unit * value, fitted through `points` (value, peak bytes)."""

    source: str
    fixed: float
    per_unit: float
    points: tuple[tuple[int, float], ...]

    def at(self, value: float) -> float:
        return self.fixed + self.per_unit * value

    def limit_value(self, limit: float) -> float | None:
        """The value at which the line reaches `limit` (None: memory does not grow)."""
        if self.per_unit <= 0:
            return None
        return (limit - self.fixed) / self.per_unit

    @property
    def resolved(self) -> bool:
        """Whether the fixed part reads as memory: an intercept below zero is no memory
        the run holds, but a line that does not hold down to a value of 0 (memory that
        grows faster than one line over the probes, or probes far from 0 whose scatter
        tips the line); its per-unit slope and where it meets a limit still stand."""
        return self.fixed >= 0

    def text(self, unit: str) -> str:
        """'fixed 1.1 GiB + 450 MiB per batch'; with the intercept below zero,
        '450 MiB per batch, fixed part not resolved (...)'."""
        if self.resolved:
            return f"fixed {size(self.fixed)} + {size(self.per_unit)} per {unit}"
        why = "the fit's intercept is below zero"
        if self.per_unit > 0:
            why += (f": the line through the probes is under 0 bytes below {unit}="
                    f"{-self.fixed / self.per_unit:.3g}")
        return f"{size(self.per_unit)} per {unit}, fixed part not resolved ({why})"




def peaks(series: Series, runtime: str) -> dict[str, float]:
    """The peak of each memory source of the cell that a run's samples carry; the
    cgroup's only where `runtime` (the result's) gave the cell a cgroup of its own.

    A step's peak can fall between two samples (50 ms apart at best; later on a busy
    host, where the sampler waits for a CPU): where the agent's end record has the
    kernel's high-water mark of its RSS (`rss_hwm`), the RSS peak is at least that, and
    the anonymous peak at least that less the largest file-backed part a sample read
    (libraries' pages). Not the last sample's: near a memory limit the kernel reclaims
    file pages after the peak (a conv net's batch 1 under 512 MiB: 210 MiB of them at
    its setup's end, 168 MiB at its last sample), and the mark less that smaller part
    overstated the batch's anonymous peak by ~40 MiB."""
    out: dict[str, float] = {}
    for key, name in SOURCES.items():
        if name == "cgroup" and not own_cgroup(runtime):
            continue
        peak = series.cols.peaks.get(key)
        if peak is not None and math.isfinite(peak):
            out[name] = peak
    hwm = (series.end or {}).get("rss_hwm")    # an int where given (protocol.ingest)
    if hwm:
        out["rss"] = max(out.get("rss", 0.0), float(hwm))
        files = [float(s["rss"]) - float(s["rss_anon"]) for s in series.samples
                 if s.get("rss") is not None and s.get("rss_anon") is not None]
        if files and "rss_anon" in out:
            out["rss_anon"] = max(out["rss_anon"], float(hwm) - max(files))
    return out


def fit_line(source: str, points: Sequence[tuple[int, float]]) -> Line | None:
    """Least squares through at least two distinct values; None with fewer."""
    pts = tuple(sorted(points))
    if len({v for v, _ in pts}) < 2:
        return None
    n = len(pts)
    mx = sum(v for v, _ in pts) / n
    my = sum(p for _, p in pts) / n
    sxx = sum((v - mx) ** 2 for v, _ in pts)
    sxy = sum((v - mx) * (p - my) for v, p in pts)
    slope = sxy / sxx
    return Line(source, my - slope * mx, slope, pts)


def fit_sources(by_value: Mapping[int, Mapping[str, float]]) -> dict[str, Line]:
    """One line per source seen in at least two fitting probes' peaks."""
    names = sorted({s for p in by_value.values() for s in p})
    out: dict[str, Line] = {}
    for name in names:
        line = fit_line(name, [(v, p[name]) for v, p in by_value.items() if name in p])
        if line is not None:
            out[name] = line
    return out


def limiting(lines: Mapping[str, Line], device_limit: float | None,
             host_limit: float | None) -> tuple[Line, float] | None:
    """The line that meets a known limit, with that limit: the device's when the run's
    device memory grows with the param (framework allocator first), else the host's;
    None when neither applies. A line that does not grow never meets a limit: a GPU
    cell whose scenario holds host memory is limited by the host's."""
    for names, limit in ((DEVICE, device_limit), (HOST, host_limit)):
        if limit is None:
            continue
        for name in names:
            if name in lines and lines[name].per_unit > 0:
                return lines[name], limit
    return None
