"""Live leak decisions while a cell runs, valid however often the host looks.

The host feeds the agent's records to a `LiveDecider` as they arrive; once a memory
source's growth rate (the heap's, USS with RSS, the device's, the framework allocator's)
is certainly above or certainly below a floor it returns a `LiveDecision`
and the host creates the agent's control file, so the agent stops measuring and still
writes its end record. `watch_file` is that loop: it tails the file through
`protocol.ingest.SeriesReader`, the one reader of agent lines, and reads on to the end,
so the cell's samples are parsed once and the Series comes back with the decision.

The test is a sign test on the per-interval growth rates r_k = (heap_k - heap_{k-1}) /
(i_k - i_{k-1}) in bytes/call, made sequential by a mixture of likelihood ratios
(a mixture SPRT). For a rate f, let a be the intervals with r_k > f and b those with
r_k < f. If at every interval P(r_k > f | past) <= 1/2 (the median rate is at most f),

    E_f = 2^(a+b) * 2 * integral_{1/2}^{1} p^a (1 - p)^b dp

is a non-negative supermartingale with E_f(0) = 1, so by Ville's inequality it ever
reaches 1/alpha with probability at most alpha, at every look, without a horizon. The
rates f it rejects give an anytime-valid lower bound `lo` of the median rate; the mirror
test gives an upper bound `hi`. Signs ignore magnitudes, so the heap's occasional jumps
(an arena, a dict resize, a freed cache) count as one interval each, whatever their size.

- leak: lo > floor, and the mean rate over the span is above the floor, the growth
  passes `min_growth`, and the latest third of the intervals is still growing: its
  median above the floor, its lower quartile >= `decay_ratio` of the earliest third's
  median rate (a cache that fills and slows
  is a plateau, not a leak). The extra conditions only make "leak" rarer, so alpha holds;
- stable: hi < floor and the mean rate is below the floor (a leak that comes in rare
  big chunks has a median of 0 but a high mean: it is never called stable).

A fill that lasts longer than the decision needs grows like a leak for as long as it
lasts, so a leak also needs what the post-run verdict needs: growth that no bounded fill
explains (`fill.fill_check`, the same function, on the source's readings so far);
until then the cell runs on, and at its end the post-run verdict says `ambiguous` and
runs it again, longer. A leak that grows by its exact size every call (a C leak read
after gc.collect(), the device's memory) passes at the first look.

The heap must be read after gc.collect() (as psleak does) with glibc's tcache off
(GLIBC_TUNABLES=glibc.malloc.tcache_count=0): otherwise cyclic garbage, Python's free
lists and the tcache (~240 KiB of freed chunks that mallinfo counts as in use) grow like
a leak for hundreds of calls until the collector or their caps stop them.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.analysis.fill import fill_check
from harness.analysis.slopes import bin_medians
from harness.analysis.trends import Kind, LiveDecision
from harness.analysis.verdict import CARRIERS
from harness.protocol.ingest import READ_CHUNK, Record, SeriesReader, no_samples
from harness.protocol.series import TREND_NAMES, Series
from harness.thresholds import AnalysisConfig

__all__ = ["FIRST_LOOK", "SPACING", "LiveDecider", "LiveDecision", "Watched",
           "median_bounds", "sign_evalue", "watch_file"]

FLOOR_BYTES = 128.0          # bytes/call: growth the live test must see to call a leak
MIN_GROWTH_BYTES = 8192.0    # and at least this much growth since the warm-up ended
DECAY_RATIO = 0.5            # latest-third median rate >= this share of the earliest third's
POLL_S = 0.02   # with the agent checking every 20 ms: a stop within ~40 ms of a sample
# The live schedule. Read after gc.collect() with the tcache off and after a sweep's
# warm-up, a real C leak grows by its exact size every call and a fixed release by 0
# (benchmarks/vs_psleak.py: multidict 6.6.3/6.6.4, ujson 5.12.0/5.12.1), so the sign
# test could call both at its 12th interval, 24 calls at a reading every 2. But a fill
# that starts with the measured phase (benchmarks/sequential_fpr.py: up to 64 KiB, time
# constant 5-50 calls) is then still growing: a first look at 24 calls called 41 % of
# stable series leaks, at 48 calls 7 %, at 80 calls none (150 series each). So the
# first look stays at 80 measured calls; a reading every 2 calls (not 5) gives the
# test 40 intervals there, and a stable release its verdict sooner.
FIRST_LOOK = 80
SPACING = 2

def sign_evalue(above: Any, below: Any) -> Any:
    """Return log E: the uniform-mixture likelihood ratio of P(above) in [1/2, 1] vs 1/2.

    Vectorised over numpy arrays of counts.

    Args:
        above: Intervals on the tested side of the rate.
        below: Intervals on the other side (ties count on neither).

    Raises:
        ValueError: A count is negative.
    """
    a, b = np.asarray(above, dtype=np.float64), np.asarray(below, dtype=np.float64)
    if np.any(a < 0) or np.any(b < 0):
        raise ValueError(f"counts must be >= 0, got above={above}, below={below}")
    # integral_{1/2}^1 p^a (1-p)^b dp = B(a+1, b+1) * I_{1/2}(b+1, a+1)
    # SciPy takes ~1.4 s to import, and only early stop needs it: imported here, not at the
    # top, so a sweep without early stop never loads it (tests/unit/test_startup.py).
    from scipy import special
    with np.errstate(divide="ignore"):
        out = ((a + b + 1) * math.log(2.0) + special.betaln(a + 1, b + 1)
               + np.log(special.betainc(b + 1, a + 1, 0.5)))
    return float(out) if out.ndim == 0 else out


def median_bounds(rates: Any, alpha: float) -> tuple[float, float]:
    """Anytime-valid (1 - alpha) lower and upper bounds of the median rate.

    `lo` is the largest rate below which the sign e-value rejects "median <= f";
    `hi` the smallest above which it rejects "median >= f". -inf/+inf when none.
    Ties between rates are counted on neither side, as the test does.
    """
    r = np.sort(np.asarray(rates, dtype=np.float64))
    n = r.size
    if n == 0:
        return -math.inf, math.inf
    need = math.log(1.0 / alpha)
    # For f just below r[j]: `above` rates exceed it, `below` are less than it.
    above = n - np.searchsorted(r, r, side="left")
    below = np.searchsorted(r, r, side="left")
    ok = np.flatnonzero(sign_evalue(above, below) >= need)
    lo = float(r[ok[-1]]) if ok.size else -math.inf
    # For f just above r[j]: rates below it vs rates above it.
    below_hi = np.searchsorted(r, r, side="right")
    ok = np.flatnonzero(sign_evalue(below_hi, n - below_hi) >= need)
    hi = float(r[ok[0]]) if ok.size else math.inf
    return lo, hi


# The sources a leak may be carried by, tested live: the carriers of the post-run
# verdict (`analysis.verdict.CARRIERS`), each read from the agent's sample keys; RSS
# only with USS agreeing.
SOURCES = tuple(CARRIERS)
SAMPLE_KEYS = {name: key for key, name in TREND_NAMES.items()}   # "gpu" -> "gpu_used"
# A stable decision needs these stable where they are read; RSS and USS move with
# page cache, arenas and lazily touched pages, so they only ever add a leak (they decide
# "stable" alone only when none of these is read).
STABLE_NEEDS = ("heap", "gpu", "fw")
# Sources that count exact bytes (the device's used memory, the framework allocator's
# bytes in use): no allocator noise, so growth in every interval is evidence enough.
EXACT = frozenset({"gpu", "fw"})
STEADY_INTERVALS = 5         # intervals of steady growth an exact source needs


class _Source:
    """The live test's state for one memory source."""

    def __init__(self, name: str):
        self.name = name
        self.warm_i = 0                      # steps done when the warm-up ended
        self.base: tuple[int, float] | None = None
        self.last: tuple[int, float] | None = None
        self.rates: list[float] = []
        self.calls: list[float] = []         # the readings since the warm-up ended
        self.values: list[float] = []

    def feed(self, i: int, value: float, measuring: bool) -> bool:
        """Take one reading; True when it added a rate."""
        if not measuring:
            if self.last is None:
                # The last reading before the measured phase is its starting level.
                self.warm_i, self.base = i, (i, value)
            return False
        prev = self.last or self.base
        self.last = (i, value)
        if prev is None:
            self.base = self.last            # no warm-up reading: start from this one
            self.calls, self.values = [float(i)], [value]
            return False
        if i <= prev[0]:
            self.last = prev
            return False
        if not self.calls:
            self.calls, self.values = [float(prev[0])], [prev[1]]
        self.calls.append(float(i))
        self.values.append(value)
        self.rates.append((value - prev[1]) / (i - prev[0]))
        return True

    def could_fill(self, cfg: AnalysisConfig, measured: int) -> bool:
        """Whether a bounded fill could still explain the growth so far."""
        x, y = bin_medians(np.asarray(self.calls), np.asarray(self.values), cfg.max_points)
        return fill_check(x, y, cfg, measured).possible


class LiveDecider:
    """Reads agent records in order; decides leak or stable once the sign test is sure.

    Every source of `sources` the agent reports is tested (the heap, USS with RSS, the
    device's memory, the framework allocator); a leak on any of them stops the cell
    (the one growing most when several are sure at once; USS and RSS only when both
    are), "stable" needs every source of `STABLE_NEEDS` with readings stable. Exact byte
    counters (`EXACT`: the device's memory, the framework allocator) are also called
    leaking after `STEADY_INTERVALS` intervals that all grew above the floor, without
    decay: they have no allocator noise for a sign test to see through, so waiting for
    its dozen intervals only costs calls.

    Args:
        cfg: `alpha` is the error rate of each verdict (false leak, false stable).
        min_iterations: No decision before this many measured iterations.
        max_iterations: Past this many measured iterations it stops deciding
            (`exhausted`); the post-run analysis then gives the verdict.
        source: One source of `SOURCES` to test alone (tests, benchmarks); default: all.
        floor: Growth rate in bytes/call that separates leak from stable.
        min_growth: Bytes of growth a leak verdict needs at least.
        decay_ratio: See the module docstring; 0 turns the check off.

    Raises:
        ValueError: The bounds or thresholds are out of range, or `source` is none of
            `SOURCES`.
    """

    def __init__(self, cfg: AnalysisConfig, min_iterations: int, max_iterations: int,
                 source: str | None = None, *, floor: float = FLOOR_BYTES,
                 min_growth: float = MIN_GROWTH_BYTES, decay_ratio: float = DECAY_RATIO):
        if not 1 <= min_iterations <= max_iterations:
            raise ValueError(f"need 1 <= min_iterations ({min_iterations}) <= "
                             f"max_iterations ({max_iterations})")
        if floor <= 0 or min_growth < 0 or not 0 <= decay_ratio < 1:
            raise ValueError(f"need floor > 0, min_growth >= 0, 0 <= decay_ratio < 1; got "
                             f"{floor}, {min_growth}, {decay_ratio}")
        if source is not None and source not in CARRIERS:
            raise ValueError(f"source {source!r}: allowed values are {', '.join(SOURCES)}")
        self.cfg = cfg
        self.carriers = {n: CARRIERS[n] for n in ((source,) if source else SOURCES)}
        # One reading per trend source, under its name (heap, uss, rss, gpu, fw).
        self.sources = {n: _Source(n) for parts in self.carriers.values() for n in parts}
        self.min_iterations, self.max_iterations = min_iterations, max_iterations
        self.floor, self.min_growth, self.decay_ratio = floor, min_growth, decay_ratio
        self.decision: LiveDecision | None = None

    @property
    def measured(self) -> int:
        """Measured iterations seen so far (by the source read furthest)."""
        return max((s.last[0] - s.warm_i for s in self.sources.values() if s.last),
                   default=0)

    @property
    def exhausted(self) -> bool:
        """True when max_iterations passed without a decision."""
        return self.decision is None and self.measured >= self.max_iterations

    def feed(self, record: Record) -> LiveDecision | None:
        """Feed one record as `SeriesReader` kept it (header, sample or end, in file order).

        Returns:
            The decision the first time one is certain (never before min_iterations
            measured iterations), else None; later calls return None.
        """
        if self.decision is not None or record.kind != "sample":
            return None
        fields = record.fields
        i, measuring = fields["i"], fields["phase"] == "measure"
        grew = False
        for src in self.sources.values():
            value = fields.get(SAMPLE_KEYS.get(src.name, src.name))
            if isinstance(value, int | float) and not isinstance(value, bool):
                grew = src.feed(i, float(value), measuring) or grew
        return self._decide() if grew else None

    def _decide(self) -> LiveDecision | None:
        found: dict[str, LiveDecision] = {}    # carrier -> its decision, where sure
        read: list[str] = []                   # carriers with readings to test
        for carrier, parts in self.carriers.items():
            srcs = [self.sources[p] for p in parts]
            if not all(s.rates for s in srcs):
                continue
            read.append(carrier)
            tests = [self._test(s, carrier if k == 0 else s.name) for k, s in enumerate(srcs)]
            first = tests[0]
            if first is not None and all(t is not None and t.verdict == first.verdict
                                         for t in tests):
                if first.verdict == "leak" and len(tests) > 1:
                    first = dataclasses.replace(first, reason=first.reason + "; " + ", ".join(
                        f"{t.source} {t.mean_rate / 1024:+.1f} KiB/call agrees"
                        for t in tests[1:] if t is not None))
                found[carrier] = first
        leaks = [d for d in found.values() if d.verdict == "leak"]
        if leaks:
            # The one growing most; on a tie the first of `SOURCES`.
            self.decision = max(leaks, key=lambda d: d.mean_rate)
            return self.decision
        needs = [c for c in read if c in STABLE_NEEDS] or read
        if needs and all(c in found for c in needs):
            # Stable on every source it needs: say the one a reader reads first (heap).
            self.decision = found[needs[0]]
        return self.decision

    def _test(self, src: _Source, label: str) -> LiveDecision | None:
        n = src.last[0] - src.warm_i if src.last else 0
        if n < self.min_iterations or n > self.max_iterations:
            return None
        assert src.base is not None and src.last is not None
        rates = np.asarray(src.rates)
        lo, hi = median_bounds(rates, self.cfg.alpha)
        growth = src.last[1] - src.base[1]
        mean = growth / max(1, src.last[0] - src.base[0])
        third = max(1, rates.size // 3)
        late, early = float(np.median(rates[-third:])), float(np.median(rates[:third]))
        # The late third's lower quartile: one jump there must not hide a fading fill.
        late_low = float(np.percentile(rates[-third:], 25))
        f = self.floor
        grows = (mean > f and growth >= self.min_growth and late > f
                 and late_low >= self.decay_ratio * early)
        steady = (src.name in EXACT and rates.size >= STEADY_INTERVALS
                  and float(rates.min()) > f)
        verdict: Kind | None = None
        if grows and (lo > f or steady) and src.could_fill(self.cfg, n):
            return None          # growing so far: a leak or a cache still filling
        if grows and (lo > f or steady):
            verdict = "leak"
            how = (f"median rate >= {lo:.0f} B/call > floor {f:.0f} at alpha "
                   f"{self.cfg.alpha:g}" if lo > f else
                   f"every one of {rates.size} intervals grew above the floor {f:.0f} "
                   "B/call (exact byte counter)")
            why = f"{label} grows {mean / 1024:+.1f} KiB/call, {how}"
        elif hi < f and mean < f:
            verdict = "stable"
            why = (f"{label} median rate <= {hi:.0f} B/call < floor {f:.0f} at "
                   f"alpha {self.cfg.alpha:g}, mean {mean:+.0f} B/call")
        if verdict is None:
            return None
        why += f"; {growth / 1024:+.1f} KiB over {n} calls ({rates.size} intervals)"
        return LiveDecision(verdict, label, n, why, f, lo, hi, mean, growth,
                            int(rates.size), self.cfg.alpha)


@dataclass(frozen=True, slots=True)
class Watched:
    """What tailing a cell's samples file gave: the live decision (None when the run
    ended undecided) and the Series of the whole file, as `read_samples` reads it."""

    decision: LiveDecision | None
    series: Series


def watch_file(path: Path, decider: LiveDecider, control: Path, stop: threading.Event,
               poll_s: float = POLL_S) -> Watched:
    """Tail the agent's JSON-lines file through one `SeriesReader` into `decider`.

    On a decision it at once writes it as JSON into `control` (the agent polls for that
    file every 20 ms and stops measuring), then reads on. It returns once `stop` is set
    (the caller sets it when the agent has exited) and the file has been read to its
    end, a last line without its newline included: `series` is then what
    `read_samples(path)` gives for the finished file (a missing file included).

    Returns:
        The decision (None when undecided) and the file's Series.
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
