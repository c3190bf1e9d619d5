"""Live decisions while a cell runs: `LiveDecider` asks `memory.memory_reading` of the
samples so far at each look and stops early only on a clear `ok` or a large leak (a
smaller one may be a cache the rest of the budget shows level off). `watch_file` tails
samples.jsonl; `replay_live` replays a recorded run."""

from __future__ import annotations

import dataclasses
import json
import math
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.analysis.memory import MemoryReading, memory_reading, risen
from harness.analysis.records import LiveDecision
from harness.analysis.rules import CARRIERS, LIVE_RULES, STOP_LEAK, STOP_OK, LiveEvidence, first_of
from harness.analysis.stepreading import rose, step_reading
from harness.matrixfile.model import BUDGET_MIN_CALLS
from harness.protocol.ingest import READ_CHUNK, Record, SeriesReader, no_samples
from harness.protocol.series import TREND_NAMES, Series
from harness.thresholds import AnalysisConfig

__all__ = ["FIRST_LOOK", "SPACING", "LiveDecider", "LiveDecision", "Watched", "decided",
           "median_bounds", "replay_live", "sign_evalue", "watch_file"]

POLL_S = 0.02   # with the agent checking every 20 ms: a stop within ~40 ms of a sample
# The first look the benchmarks and docs name: 80 calls at a reading every 2 calls.
FIRST_LOOK = 80
SPACING = 2


def sign_evalue(above: Any, below: Any) -> Any:
    """log E: the uniform-mixture likelihood ratio of P(above) in [1/2, 1] vs 1/2, vectorised;
    ValueError if a count is negative.

    Args:
        above, below: intervals on the tested side of the rate, and on the other side.
    """
    a, b = np.asarray(above, dtype=np.float64), np.asarray(below, dtype=np.float64)
    if np.any(a < 0) or np.any(b < 0):
        raise ValueError(f"counts must be >= 0, got above={above}, below={below}")
    # integral_{1/2}^1 p^a (1-p)^b dp = B(a+1, b+1) * I_{1/2}(b+1, a+1)
    # lazy: SciPy imports slowly and only early stop needs it (tests/unit/test_startup.py).
    from scipy import special
    with np.errstate(divide="ignore"):
        out = ((a + b + 1) * math.log(2.0) + special.betaln(a + 1, b + 1)
               + np.log(special.betainc(b + 1, a + 1, 0.5)))
    return float(out) if out.ndim == 0 else out


def median_bounds(rates: Any, alpha: float) -> tuple[float, float]:
    """Anytime-valid (1 - alpha) lower and upper bounds of the median rate.

    `lo`/`hi`: the rates past which the sign e-value rejects "median <= f"/"median >= f"
    (-inf/+inf when none); ties count on neither side.
    """
    r = np.sort(np.asarray(rates, dtype=np.float64))
    n = r.size
    if n == 0:
        return -math.inf, math.inf
    need = math.log(1.0 / alpha)
    # f just below r[j]: `above` rates exceed it, `below` are less.
    above = n - np.searchsorted(r, r, side="left")
    below = np.searchsorted(r, r, side="left")
    ok = np.flatnonzero(sign_evalue(above, below) >= need)
    lo = float(r[ok[-1]]) if ok.size else -math.inf
    # f just above r[j]: rates below it vs above it.
    below_hi = np.searchsorted(r, r, side="right")
    ok = np.flatnonzero(sign_evalue(below_hi, n - below_hi) >= need)
    hi = float(r[ok[0]]) if ok.size else math.inf
    return lo, hi


# The carriers of the one memory decision, each by its agent sample key.
SOURCES = tuple(CARRIERS)
SAMPLE_KEYS = {name: key for key, name in TREND_NAMES.items()}   # "gpu" -> "gpu_used"
# An `ok` needs these certain where read; RSS and USS (moved by page cache) decide it
# alone only when none of these is read.
STABLE_NEEDS = ("heap", "gpu", "fw")
# ... and the workers' USS wherever any sample carried it (the caller's say nothing of it).
WORKER_NEEDS = ("kids",)
EVERY_READING = 200          # readings looked at one by one; past it every hundredth
# Memory keys of a sample, whose range so far bounds what any source grew.
_MEMORY_KEYS = tuple(TREND_NAMES)
# The live leak rule's growth of a source stays under this many times its range so far.
_GROWTH_PER_RANGE = 4.0
# What a sample carries besides memory, kept when the decider tests one source alone.
_KEEP = ("type", "src", "phase", "i", "t", "dt")


class LiveDecider:
    """Reads agent records in order; each look asks the one memory decision of the samples so
    far, and stops on a large leak or a certain `ok`. ValueError: bounds or thresholds out of
    range, or `source` not in `SOURCES`.

    Args:
        min_iterations, max_iterations: it decides only between these many measured calls.
        source: one source of `SOURCES` to test alone (tests, benchmarks); default: all.
        floor, min_growth, decay_ratio: the per-call rule's thresholds, in place of `cfg`'s.
    """

    def __init__(self, cfg: AnalysisConfig, min_iterations: int, max_iterations: int,
                 source: str | None = None, *, floor: float | None = None,
                 min_growth: float | None = None, decay_ratio: float | None = None):
        if not 1 <= min_iterations <= max_iterations:
            raise ValueError(f"need 1 <= min_iterations ({min_iterations}) <= "
                             f"max_iterations ({max_iterations})")
        f = cfg.live_floor_bytes if floor is None else floor
        g = cfg.live_min_growth_bytes if min_growth is None else min_growth
        d = cfg.live_decay_ratio if decay_ratio is None else decay_ratio
        if f <= 0 or g < 0 or not 0 <= d < 1:
            raise ValueError(f"need floor > 0, min_growth >= 0, 0 <= decay_ratio < 1; got "
                             f"{f}, {g}, {d}")
        if source is not None and source not in CARRIERS:
            raise ValueError(f"source {source!r}: allowed values are {', '.join(SOURCES)}")
        self.cfg = dataclasses.replace(cfg, live_floor_bytes=f, live_min_growth_bytes=g,
                                       live_decay_ratio=d)
        self.keys: tuple[str, ...] | None = (
            None if source is None else tuple(SAMPLE_KEYS.get(p, p) for p in CARRIERS[source]))
        self.min_iterations, self.max_iterations = min_iterations, max_iterations
        self.floor, self.min_growth, self.decay_ratio = f, g, d
        self.series = Series()
        self.readings = 0
        self.seen: set[str] = set()     # `WORKER_NEEDS` any sample so far carried
        self.budget = 0.0               # the run's time budget (its header), 0: none
        self.least = 0.0                # ... the calls it makes at least (`--budget-min`)
        self.cap = 0.0                  # ... and its cap on calls (`--iterations`)
        self.started: float | None = None   # the measured phase's first sample time
        self.now = 0.0                  # the latest sample's time
        self.cell: float | None = None  # the latest measured step sample's `cell_s`
        self.span: dict[str, tuple[float, float]] = {}  # each memory key's range so far
        self.decision: LiveDecision | None = None

    @property
    def measured(self) -> int:
        """Measured iterations seen so far."""
        return self.series.cols.calls

    @property
    def elapsed(self) -> float:
        """Seconds the measured phase has run in the cell's own time, as its budget counts
        them (the agent's `cell_s`, which excludes load; else the latest sample's time)."""
        if self.cell is not None:
            return self.cell
        return self.now - self.started if self.started is not None else 0.0

    def feed(self, record: Record) -> LiveDecision | None:
        """Feed one record as `SeriesReader` kept it (header, sample or end, in file order).

        Returns:
            The decision the first time one is certain (never before `min_iterations`),
            else None.
        """
        if record.kind == "header":
            config = (record.fields or {}).get("config") or {}
            self.budget, self.cap = _number(config.get("budget")), _number(config.get("iterations"))
            # before the header said it: what harness gives every budgeted run
            least = config.get("budget_min", min(BUDGET_MIN_CALLS, self.cap or BUDGET_MIN_CALLS))
            self.least = _number(least)
        if self.decision is not None or record.kind != "sample":
            return None
        fields = record.fields
        if isinstance(t := fields.get("t"), int | float):
            self.now = float(t)
            if self.started is None and fields.get("phase") == "measure":
                self.started = self.now
        if fields.get("phase") == "measure" and isinstance(c := fields.get("cell_s"), int | float):
            self.cell = float(c)
        if self.keys is not None:
            fields = {k: v for k, v in fields.items() if k in _KEEP or k in self.keys}
        self.series.samples.append(fields)
        self.seen.update(s for s in WORKER_NEEDS if fields.get(SAMPLE_KEYS.get(s, s)) is not None)
        span = self.span
        for key in _MEMORY_KEYS:
            if isinstance(v := fields.get(key), int | float):
                lo, hi = span.get(key, (v, v))
                span[key] = (min(lo, v), max(hi, v))
        if fields.get("phase") != "measure" or fields.get("src") != "step":
            return None
        self.readings += 1
        n = self.readings
        if n > EVERY_READING and n % max(1, n // 100):
            return None
        if self._cannot_stop():
            return None
        return self.look()

    def _cannot_stop(self) -> bool:
        """Whether a look now would run on whatever it read, known without making it
        (looks are costly): the live table on the most a look could read, a leak grown
        `_GROWTH_PER_RANGE` times the widest range so far, keeps the run going."""
        widest = max((hi - lo for lo, hi in self.span.values()), default=0.0)
        most = LiveEvidence("bound", widest * _GROWTH_PER_RANGE, self.cfg.leak_large_bytes,
                            "bound", 0.0, self.cfg.ok_floor_bytes,
                            self.share(self.elapsed, self.series.cols.calls),
                            self.cfg.live_ok_share)
        return first_of(most, LIVE_RULES)[0].id == "live-early"

    def look(self) -> LiveDecision | None:
        """The memory decision on the samples so far where it settles the cell: a leak, or
        an `ok` while the steps show no slowdown."""
        k = self.series.cols.calls
        if k < self.min_iterations or k > self.max_iterations:
            return None
        # Growth that starts late reads flat until it starts, and steps rising so far are
        # read over the whole run, so neither may stop the run early.
        seconds = self.elapsed
        found = decided(memory_reading(self.series, self.cfg, collected=False), self.cfg,
                        self.seen, self.share(seconds, k), self._rising)
        if found is None:
            return None
        self.decision = dataclasses.replace(found, iterations=k, seconds=round(seconds, 3),
                                            budget=self.budget)
        return self.decision

    def share(self, seconds: float, calls: int) -> float:
        """The share of its whole run a budgeted run has measured (1 without a budget): it
        ends when its budget is spent and its least calls made, or at its cap."""
        if self.budget <= 0:
            return 1.0
        spent = min(seconds / self.budget, calls / self.least if self.least > 0 else 1.0)
        return max(spent, calls / self.cap if self.cap > 0 else 0.0)

    def _rising(self) -> bool:
        """Whether the step times so far rose, as the verdict reads them, including a rise
        not steady yet: a step that grows in stages rises in steps."""
        steps = step_reading(self.series, self.cfg)[0]
        return steps is not None and rose(steps, self.cfg)


def decided(reading: MemoryReading, cfg: AnalysisConfig, seen: Collection[str] = (),
            measured: float = 1.0, rose: Callable[[], bool] = bool) -> LiveDecision | None:
    """Whether a reading settles a cell live: the first rule of `rules.LIVE_RULES` that
    fires, or None (it runs on). `measured`: the share of its budget measured; `rose`:
    whether its step times so far rose."""
    mem = reading.memory
    leak = reading.carrier if reading.kind == "leak" and reading.carrier is not None else ""
    grown = risen(mem[CARRIERS[leak][0]]) if leak else 0.0
    needs = [s for s in STABLE_NEEDS if s in mem] or [s for s in ("uss", "rss") if s in mem]
    workers = [s for s in WORKER_NEEDS if s in mem or s in seen]
    flat = reading.kind == "ok" and bool(needs) and all(
        s in mem and mem[s].kind != "insufficient" for s in workers)
    # The late third too: growth that started lately barely moves the whole slope.
    upper = max((max(mem[s].slope_hi, mem[s].late_hi) for s in needs + workers if s in mem),
                default=math.inf)
    rule, _ = first_of(LiveEvidence(leak, grown, cfg.leak_large_bytes,
                                     needs[0] if flat else "", upper, cfg.ok_floor_bytes,
                                     measured, cfg.live_ok_share, rose), LIVE_RULES)
    if rule.says == STOP_LEAK:
        t = mem[CARRIERS[leak][0]]
        why = (f"{reading.reason}; past the {cfg.leak_large_bytes / 2**20:,.0f} MiB that "
               "matters whatever it is")
        return LiveDecision("leak", leak, reading.calls, why, cfg.live_floor_bytes,
                            t.slope_lo, t.slope_hi, t.slope, t.growth, t.n, cfg.alpha,
                            rule=rule.id)
    if rule.says != STOP_OK:
        return None
    t = mem[needs[0]]
    said = reading.missed_said
    why = (f"{needs[0]} slope <= {t.slope_hi:.0f} B/call (late third <= "
           f"{t.late_hi:.0f}) < per-call floor {cfg.ok_floor_bytes:.0f}"
           + (f"; {said}" if said else ""))
    return LiveDecision("stable", needs[0], reading.calls, why, cfg.ok_floor_bytes,
                        t.slope_lo, t.slope_hi, t.slope, t.end - t.start, t.n, cfg.alpha,
                        rule=rule.id)


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


@dataclass(frozen=True, slots=True)
class Watched:
    """What tailing a samples file gave: the live decision (None: undecided) and the
    file's Series, as `read_samples` reads it."""

    decision: LiveDecision | None
    series: Series


def watch_file(path: Path, decider: LiveDecider, control: Path, stop: threading.Event,
               poll_s: float = POLL_S,
               heard: Callable[[str, Mapping[str, object]], None] | None = None) -> Watched:
    """Tail the agent's JSON-lines file into `decider` (each record into `heard`), writing a
    decision at once into `control`, which the agent polls, until `stop` and the file's end.

    Returns the decision (None: undecided) and the Series `read_samples(path)` gives.
    """
    reader = SeriesReader()
    decision: LiveDecision | None = None
    offset = 0
    seen = False
    while True:
        stopping = stop.is_set()
        try:
            with path.open("rb") as fh:
                seen = True
                fh.seek(offset)
                while not reader.full and (chunk := fh.read(READ_CHUNK)):
                    offset += len(chunk)
                    for record in reader.feed_bytes(chunk):
                        if heard is not None:
                            heard(record.kind, record.fields)
                        if decision is None:
                            decision = decider.feed(record)
                            if decision is not None:
                                _write_control(control, decision)
        except FileNotFoundError:
            pass
        if stopping:
            return Watched(decision, reader.finish() if seen else no_samples())
        stop.wait(poll_s)


def _write_control(control: Path, decision: LiveDecision) -> None:
    tmp = control.with_name(control.name + ".tmp")
    tmp.write_text(json.dumps(decision.to_dict()))
    tmp.replace(control)


def replay_live(cfg: AnalysisConfig, series: Series, min_iterations: int,
                max_iterations: int) -> LiveDecision | None:
    """The live decider's decision on `series`, fed in file order; None when none."""
    try:
        decider = LiveDecider(cfg, min_iterations, max_iterations)
    except ValueError:
        return None
    records = [Record("header", 0, series.header)] if series.header is not None else []
    records += [Record("sample", 0, s) for s in series.samples]
    if series.end is not None:
        records.append(Record("end", 0, series.end))
    for record in records:
        if (found := decider.feed(record)) is not None:
            return found
    return None
