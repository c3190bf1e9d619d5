"""Every table of rules: each `Rule` has an id, what it decides, when, the thresholds it reads
and a test over the table's evidence; the first that fires decides (`first_of`).

`TABLES` lists them in reading order, for docs/verdicts.md (generated, a test compares) and
`--why`, which names the rule that fired. Every threshold a decision compares is compared
here, not where the figures are computed."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar, cast, get_args

from harness.analysis.facts import Facts
from harness.analysis.kinds import Verdict
from harness.analysis.records import Confirmation, MemoryTrend, SlopeFit, StepTrend
from harness.thresholds import AnalysisConfig

E = TypeVar("E")


@dataclass(frozen=True)
class Rule(Generic[E]):
    """One rule: its id (kept in the result), what it decides, when, the thresholds it
    reads, and its test: what it names when it fires (a carrier, a source), else None."""

    id: str
    says: str
    when: str
    thresholds: tuple[str, ...]
    test: Callable[[E], str | None]
    memory: bool = False           # a rule of memory alone: the live decider's too

    @property
    def verdict(self) -> Verdict:
        """What a rule of the verdict's table decides, as a verdict."""
        if self.says not in get_args(Verdict):
            raise ValueError(f"rule {self.id} decides {self.says!r}, not a verdict")
        return cast(Verdict, self.says)


def first_of(ev: E, rules: tuple[Rule[E], ...]) -> tuple[Rule[E], str]:
    """The first rule of `rules` (a table, in order) that fires, and what it names."""
    for rule in rules:
        named = rule.test(ev)
        if named is not None:
            return rule, named
    raise AssertionError("the last rule always fires")


NEAR_FLOOR_MULTIPLE = 2.0   # growth under this many floors ...
NEAR_FLOOR_DECAY = 0.9      # ... with the late slope under this share of the whole one
CREEP_MARGIN = 2.0          # a creep's next run: this many times the calls its floor needs
CREEP_MAX_CALLS = 1_000_000     # the most a budgeted run makes (matrixfile.BUDGET_CAP)


def per_call_rule(lo: float, growth: float, late: float, late_lo: float, slope: float,
                  cfg: AnalysisConfig, floor: float | None = None) -> bool:
    """The per-call rule: the slope's lower bound `lo` above `floor` (`live_floor_bytes`
    by default), growth past `live_min_growth_bytes`, the late slope keeping the rate."""
    return (lo > (cfg.live_floor_bytes if floor is None else floor)
            and growth >= cfg.live_min_growth_bytes
            and late_lo > 0.0 and late >= cfg.live_decay_ratio * slope)


def steady_above(whole: SlopeFit, late: SlopeFit, span: float, cfg: AnalysisConfig) -> bool:
    """The per-call rule over fitted slopes. Such growth is never `ok`, however small
    against the source's floor: a leak, or (`memory.fill_check`) a cache still filling."""
    return per_call_rule(whole.lo, whole.slope * span, late.slope, late.lo, whole.slope, cfg)


def steady_above_trend(t: MemoryTrend, cfg: AnalysisConfig) -> bool:
    """`steady_above` read back from a trend's own figures (what a reader can check)."""
    return per_call_rule(t.slope_lo, t.growth, t.late_slope, t.late_lo, t.slope, cfg)


def creeping(whole: SlopeFit, late: SlopeFit, span: float, floor: float,
             cfg: AnalysisConfig, most: float = math.inf) -> bool:
    """The per-call rule at `ok_floor_bytes`: steady growth too small for either leak rule,
    where a run of at most `most` (and `CREEP_MAX_CALLS`) calls would pass the floor."""
    return per_call_rule(whole.lo, whole.slope * span, late.slope, late.lo, whole.slope,
                         cfg, cfg.ok_floor_bytes) \
        and CREEP_MARGIN * floor / whole.lo <= min(most, CREEP_MAX_CALLS)


@dataclass(frozen=True)
class TrendEvidence:
    """A source's figures (`memory.trend_and_fill`), as its kind's rules read them.

    Attributes:
        n, least, span: readings after warm-up, the fewest a kind needs, calls they span.
        whole, late: Theil-Sen slopes, whole span and late window (None: only `too-few` asked).
        growth, rise: the whole slope times the span, and last less first readings' median.
        floor, per_call, creep_calls: the source's floor (bytes); as `trend_and_fill` takes them.
    """

    cfg: AnalysisConfig
    n: int
    least: int
    span: float
    whole: SlopeFit | None = None
    late: SlopeFit | None = None
    growth: float = 0.0
    rise: float = 0.0
    floor: float = 0.0
    per_call: bool = True
    creep_calls: float = math.inf

    @property
    def fits(self) -> tuple[SlopeFit, SlopeFit]:
        assert self.whole is not None and self.late is not None, "fits asked before fitted"
        return self.whole, self.late

    @property
    def trending(self) -> bool:
        return self.fits[0].lo > 0.0 and self.growth > self.floor

    @property
    def kept_up(self) -> bool:
        """Still growing: the late slope's bound, kept up over the span, passes the floor."""
        return self.trending and self.fits[1].lo * self.span > self.floor

    @property
    def rose(self) -> bool:
        """It grew: a trend, or a first-to-last rise over the floor (a ratchet, a buffer)."""
        return self.trending or self.rise > self.floor


def _per_call(ev: TrendEvidence) -> str | None:
    whole, late = ev.fits
    return "per-call" if ev.per_call and steady_above(whole, late, ev.span, ev.cfg) else None


def _near_floor(ev: TrendEvidence) -> str | None:
    whole, late = ev.fits
    slowing = late.slope < NEAR_FLOOR_DECAY * whole.slope
    return "total" if ev.kept_up and slowing and \
        ev.growth < NEAR_FLOOR_MULTIPLE * ev.floor else None


def _stalled(ev: TrendEvidence) -> str | None:
    whole, late = ev.fits
    # Against the mean rate of rise as well: Theil-Sen all but ignores a few steps.
    rate = max(whole.slope, ev.rise / ev.span)
    stalled = late.hi < ev.cfg.stall_fraction * rate or late.hi * ev.span <= ev.floor
    return "late" if ev.rose and stalled else None


def _trend_creeps(ev: TrendEvidence) -> str | None:
    whole, late = ev.fits
    return "creep" if ev.per_call and creeping(whole, late, ev.span, ev.floor, ev.cfg,
                                               ev.creep_calls) else None


# Each `says` is a memory kind, or "creep": ambiguous, rerun to pass its floor.
TREND_RULES: tuple[Rule[TrendEvidence], ...] = (
    Rule("too-few", "insufficient", "fewer readings than `min_samples` (5 for the GPU and "
         "the framework allocator), or none apart", ("min_samples",),
         lambda ev: "readings" if ev.n < max(ev.least, 2) or ev.span <= 0 else None),
    Rule("per-call", "leak", "the per-call rule (not for RSS or the cgroup, which pages "
         "move): the slope's interval wholly above `live_floor_bytes`, growth past "
         "`live_min_growth_bytes`, the late slope (interval above zero) keeping "
         "`live_decay_ratio` of the rate",
         ("live_floor_bytes", "live_min_growth_bytes", "live_decay_ratio"), _per_call),
    Rule("near-floor", "ambiguous", "still growing (below), but slowing (late slope under "
         f"{NEAR_FLOOR_DECAY:g} of the whole one) and under {NEAR_FLOOR_MULTIPLE:g} floors: "
         "a short run of a warming cache or allocator, until a longer run says so", (),
         _near_floor),
    Rule("total-floor", "leak", "the slope's interval above zero, its growth over the "
         "floor (the configured floor, its noise band, its largest drawdown), and the late "
         "slope's lower bound, kept up over the span, over it too",
         ("leak_floor_bytes", "heap_floor_bytes", "noise_multiple", "drawdown_multiple"),
         lambda ev: "total" if ev.kept_up else None),
    Rule("stalled", "plateau", "it grew (a trend, or a rise from the first readings to "
         "the last over the floor), then the late slope's upper bound fell under "
         "`stall_fraction` of the rate or would not pass the floor over the span",
         ("stall_fraction",), _stalled),
    Rule("rose", "ambiguous", "it grew, but neither still growing nor stalled: the late "
         "window is too noisy to tell", (), lambda ev: "rise" if ev.rose else None),
    Rule("creep", "creep", "under both floors, but steady: the per-call rule at "
         "`ok_floor_bytes`, where a run of at most the calls 30 s holds "
         f"(and {CREEP_MAX_CALLS:,}) would pass its floor {CREEP_MARGIN:g} times: "
         "ambiguous, and it runs again that long", ("ok_floor_bytes",), _trend_creeps),
    Rule("stable", "stable", "its growth within the floor", (),
         lambda ev: "floor" if ev.growth <= ev.floor else None),
    Rule("unsure", "ambiguous", "none of the above (a fall, noise)", (),
         lambda ev: "source"),
)


@dataclass(frozen=True)
class CollectedEvidence:
    """The heap's trend beside the `gc.collect()` after the last call (`memory.garbage`).

    Attributes:
        kind, creep, floor: the heap's kind ("" without a collection reading), creep and floor.
        grew, kept: bytes over its first reading before and after the collection.
    """

    kind: str = ""
    creep: bool = False
    grew: float = 0.0
    kept: float = 0.0
    floor: float = 0.0


GARBAGE = "garbage"
GARBAGE_RULES: tuple[Rule[CollectedEvidence], ...] = (
    Rule("uncollected", "as read", "the heap is neither `leak` nor undecided, or the run "
         "has no collection after its last call", (),
         lambda ev: "heap" if ev.kind not in ("leak", "ambiguous") else None),
    Rule("kept-leak", "as read", "the heap leaks, and the collection gave nothing back, or "
         "it keeps over half what it grew, or over its floor: a leak keeps what it grew",
         (), lambda ev: "heap" if ev.kind == "leak" and (
             ev.grew <= 0 or ev.kept > ev.grew / 2 or ev.kept > ev.floor) else None),
    Rule("kept-unsure", "as read", "the heap is undecided, and it keeps over half its "
         "floor, or (a creep) over half what it grew", (),
         lambda ev: "heap" if ev.kind == "ambiguous" and (
             ev.kept > ev.floor / 2 or (ev.creep and ev.kept > ev.grew / 2)) else None),
    Rule("garbage", GARBAGE, "what it grew, the collection gave back: cyclic garbage that "
         "Python's oldest generation frees in its own time, not a leak; the heap reads "
         "stable", (), lambda ev: "heap"),
)


# Memory that may carry a leak, and the sources each needs leaking. RSS counts only with
# USS agreeing (page cache moves RSS, not USS); `kids` is the worker processes' USS.
CARRIERS: dict[str, tuple[str, ...]] = {
    "heap": ("heap",), "uss+rss": ("uss", "rss"), "gpu": ("gpu",), "fw": ("fw",),
    "kids": ("kids",)}
# Read first, in order, when nothing leaks.
PRIMARY = ("heap", "uss", "rss")
WORKERS = "kids"


def shown(source: str) -> str:
    """A memory source as words name it (`kids` as "workers")."""
    return "workers" if source == WORKERS else source

# The share of the USS's growth the heap's must hold to be named the carrier.
HEAP_HOLDS = 0.75
PLATEAUS = ("heap", "uss", "rss", "gpu", "fw", "kids")
# Read by the total floor only: pages move RSS and the cgroup with no leak behind them.
TOTAL_ONLY = frozenset({"rss", "cgroup"})


@dataclass(frozen=True)
class Evidence:
    """What the rules read, built once per cell: every source's trend and the `Facts`."""

    memory: Mapping[str, MemoryTrend]
    facts: Facts = field(default_factory=Facts)

    @property
    def primary(self) -> str | None:
        return next((k for k in PRIMARY if k in self.memory), None)


def leaking(memory: Mapping[str, MemoryTrend]) -> list[tuple[str, MemoryTrend]]:
    """The carriers whose every source leaks, with their first source's trend, largest
    growth per call first. The heap comes before USS where it holds `HEAP_HOLDS` of USS's
    growth: the narrower carrier, whose line tracemalloc names."""
    leaks = {source for source, t in memory.items() if t.kind == "leak"}
    if not leaks:
        return []
    found = sorted(((name, memory[parts[0]]) for name, parts in CARRIERS.items()
                    if leaks.issuperset(parts)), key=lambda pair: -pair[1].slope)
    names = [name for name, _ in found]
    if names[:1] == ["uss+rss"] and "heap" in names:
        heap = found[names.index("heap")]
        if heap[1].slope >= HEAP_HOLDS * found[0][1].slope:
            found.remove(heap)
            found.insert(0, heap)
    return found


def filling_carrier(ev: Evidence) -> str | None:
    """The carrier whose leak a filling cache could still explain, largest rate first
    (USS with RSS where either could be a fill and the other leaks or could be one)."""
    fills = ev.facts.filling
    found: list[tuple[float, str]] = []
    for name, parts in CARRIERS.items():
        if not all(p in ev.memory and (p in fills or ev.memory[p].kind == "leak")
                   for p in parts):
            continue
        filling = [p for p in parts if p in fills]
        if filling:
            found.append((ev.memory[filling[0]].slope, name))
    return max(found)[1] if found else None


def _leak(ev: Evidence) -> str | None:
    found = leaking(ev.memory)
    return found[0][0] if found else None


def read_sources(ev: Evidence) -> tuple[str, ...]:
    """The sources an `ok` rests on: the primary (first of heap, USS, RSS) and the
    workers' USS where any started, since a pool's leak lives in its workers alone."""
    p = ev.primary
    return tuple(s for s in (p, WORKERS) if s is not None and s in ev.memory)


def _insufficient(ev: Evidence) -> str | None:
    if ev.primary is None:
        return "none"
    return next((s for s in read_sources(ev) if ev.memory[s].kind == "insufficient"),
                None)


def _creep(ev: Evidence) -> str | None:
    return next((s for s in read_sources(ev)
                 if ev.memory[s].kind == "ambiguous" and ev.memory[s].creep), None)


def _unsure(ev: Evidence) -> str | None:
    return next((s for s in read_sources(ev) if ev.memory[s].kind == "ambiguous"), None)


def _unconfirmed(ev: Evidence) -> str | None:
    rss, uss = ev.memory.get("rss"), ev.memory.get("uss")
    return "rss" if rss is not None and rss.kind == "leak" and (
        uss is None or uss.kind != "stable") else None


def _plateau(ev: Evidence) -> str | None:
    return next((k for k in PLATEAUS if k in ev.memory and ev.memory[k].kind == "plateau"),
                None)


def _ok(ev: Evidence) -> str | None:
    return ev.primary or "none"


def _slowed(ev: Evidence) -> bool:
    return bool(ev.facts.slowdown) and not ev.facts.busy


def _gpu_in_run(ev: Evidence) -> str | None:
    """The log shows the image cannot use the GPU, and the run showed nothing that stands
    regardless: it crashed, or nothing leaked, slowed or levelled off."""
    f = ev.facts
    if f.gpu_unusable is None or f.ended not in (None, "crash"):
        return None
    if f.ended is None and (_slowed(ev) or memory_rule(ev)[0].id in ("leak", "plateau")):
        return None
    return "gpu"


def _ended(kind: str) -> Callable[[Evidence], str | None]:
    def test(ev: Evidence) -> str | None:
        return "run" if ev.facts.ended == kind else None
    return test


def _leak_then_timeout(ev: Evidence) -> str | None:
    return _leak(ev) if ev.facts.ended == "timeout" else None


# Undecided: the host was busy (read by the re-run rules, `stages.measure`, `sweeping`).
BUSY_HOST = "busy-host"
# Undecided: a deadline ended a run the host slowed (re-run rules, the sweep's last line).
TIMEOUT_BUSY = "timeout-busy"
# Undecided: a filling cache could explain the growth (`stages.measure`).
FILLING = "filling"
# Undecided: the budget cut a leak short of `short_calls` (`stages.measure`).
SHORT = "short"
# A first attempt's slowdown must last through a run twice as long (`stages.measure`).
RISING = "rising"
# Undecided: the confirmation rounds left the doubt open (`sweeping.course`).
UNSETTLED = "unsettled"
# Undecided: no second run read the slowdown (`compare` skips such a cell).
ONE_RUN = "one-run"
# Undecided: pooled step times slower, with no rounds to confirm it (`rounds: 0`).
SUSPECTED = "suspected"
# Undecided by step time alone, which load can cause on clean memory
# (`answers.search.free_of`).
TIME_UNDECIDED = (UNSETTLED, ONE_RUN, BUSY_HOST, RISING, SUSPECTED)
LEAK_THRESHOLDS = ("live_floor_bytes", "live_min_growth_bytes", "live_decay_ratio",
                   "leak_floor_bytes", "heap_floor_bytes", "fill_share", "fill_bytes")
RULES: tuple[Rule[Evidence], ...] = (
    Rule("unavailable", "unavailable", "the image or the engine could not be had (a pin "
         "that does not install, an image not found): nothing ran", (),
         lambda ev: "image" if ev.facts.unavailable is not None else None),
    Rule("gpu-precheck", "not-applicable", "the GPU precheck found the image cannot use "
         "the GPU (CUDA too new for the driver, no kernel for its architecture)", (),
         lambda ev: "gpu" if ev.facts.precheck is not None else None),
    Rule("runaway", "leak", "the agent's safety stop ended the run: from the end of the "
         "run's first call (which may build a CUDA context or compile), checked every 10 "
         "ms by a watchdog beside it whatever `min_iterations` says, its memory grew past "
         "the limit (384 MiB, at most half the memory free to the cell then; the agent's "
         "`--stop-growth`); a call that does not return is killed past twice the limit",
         (),
         lambda ev: "uss+rss" if ev.facts.runaway else None),
    Rule(TIMEOUT_BUSY, "ambiguous", "the run was killed at its wall-clock deadline (the "
         "matrix's `timeout:`, the plugin's and `harness.check`'s), but the host took at "
         "least half the time its calls ran (run-queue delay and the agent's sampling, "
         "the agent's `cell_s`) and no call was stuck (in progress for 1 s on the agent's "
         "clock): the deadline measured the host, not the scenario, and what the shortened "
         "run read is no finding, neither `ok` nor `leak`; it runs the same again where "
         "its repeats allow, and stays undecided: raise `timeout:` or run on a quieter "
         "host", (), lambda ev: "run" if ev.facts.crowded else None),
    Rule("timeout-leak", "leak", "the run was killed at its timeout, and a carrier leaked "
         "before it (rule `leak`): a finding about the image", LEAK_THRESHOLDS,
         _leak_then_timeout),
    Rule("gpu-in-run", "not-applicable", "the run's log shows the image cannot use the "
         "GPU (PTX JIT, no kernel image), and it crashed, or nothing leaked, slowed or "
         "levelled off", (), _gpu_in_run),
    Rule("oom", "oom", "killed out of memory (OOMKilled, or its cgroup peak near the "
         "limit), or the framework ran out of device memory", (), _ended("oom")),
    Rule("timeout", "timeout", "killed at its timeout", (), _ended("timeout")),
    Rule("crash", "crash", "the scenario raised, the process exited non-zero or was "
         "killed from outside, or the agent left no end record", (), _ended("crash")),
    Rule("not-applicable", "not-applicable", "the log says the image cannot run here "
         "(no GPU, a CUDA driver too old)", (), _ended("not-applicable")),
    Rule("capped", "ambiguous", "a carrier leaks (rule `leak`), but the run stopped at its "
         "cap on calls (`max_iterations`) with over half its time budget left, and the "
         "cell may run again: the rest of the budget could show the growth level off; "
         "it runs again with its cap raised to what the budget holds", (),
         lambda ev: _leak(ev) if ev.facts.capped else None),
    Rule(SHORT, "ambiguous", "a carrier leaks (rule `leak`) by less than "
         "`leak_large_bytes`, but the run's time budget ended it after fewer than "
         "`short_calls` calls (its steps are slow), and the cell may run again: a cache of "
         "as many entries as it made calls fills like a leak for all of them; it runs "
         "again until it has made `short_calls` calls (its cap, if lower); where its "
         "`overrun` bound leaves no room for that run it stays undecided, never a leak",
         ("short_calls", "leak_large_bytes"),
         lambda ev: _leak(ev) if ev.facts.short else None),
    Rule("leak", "leak", "every source of a carrier (heap; USS with RSS; GPU; framework "
         "allocator; the USS of the worker processes the scenario started) is `leak`: by "
         "the per-call rule (not RSS's: pages move it) or the total-floor rule, and no "
         "bounded fill fits its growth", LEAK_THRESHOLDS, _leak, memory=True),
    Rule(RISING, "ambiguous", "rule `slowdown` would fire on the cell's first attempt, "
         "and a run twice as long fits 30 s at its pace (`stepreading.RISE_MAX_S`): steps "
         "rising through a whole run are a slowdown or a cost that cycles with the "
         "scenario's input; the cell runs again twice as long, and a slowdown that lasts "
         "is one", (), lambda ev: "steps" if _slowed(ev) and ev.facts.rising else None),
    Rule(ONE_RUN, "ambiguous", "rule `slowdown` would fire, but no earlier run of the cell "
         "read that slowdown: one run is a suspicion (a busy host, a cost that cycles with "
         "the input), never a finding; the cell runs again (twice as long) where it may, "
         "and a slowdown a second run reads too is one; where it may not (its repeats "
         "spent, `--iterations`, its `overrun` bound) it stays undecided, saying the run "
         "that would confirm it", (),
         lambda ev: "steps" if _slowed(ev) and ev.facts.once else None),
    Rule("slowdown", "slowdown", "late steps slower than early ones (the wall clock; at "
         "one CPU speed only where that lowers it), rising bin after bin and not back "
         "under half that rise late in the run (a cost that cycles with the input; a "
         "wall clock that fell only where the CPU got faster, its rise lasting at one CPU "
         "speed, did not), and no busy host explains it",
         ("alpha", "min_ratio", "step_floor_s", "step_window"),
         lambda ev: "steps" if _slowed(ev) else None),
    Rule(FILLING, "ambiguous", "a carrier's growth passes a leak rule, but a saturating "
         "fill no larger than `fill_share` of its level (at most `fill_bytes`) fits it, or "
         "it fell at once by a quarter of its rise (a cache that evicts in bursts): a leak "
         "or a cache still filling; the cell runs again 4x longer (a budgeted run that made "
         "fewer than `short_calls` calls, until it makes them at least)",
         ("fill_share", "fill_bytes"), filling_carrier, memory=True),
    Rule(BUSY_HOST, "ambiguous", "late steps are slower, but the rise in run-queue delay "
         "or throttling per step accounts for `contention_share` of it and CPU time per "
         "step did not rise by half of it: the host was busy; the cell runs again",
         ("contention_share",), lambda ev: "steps" if ev.facts.busy else None),
    Rule("insufficient", "ambiguous", "the first of heap, USS, RSS read, or the USS of the "
         "worker processes the scenario started, has fewer than `min_samples` readings "
         "(5 for the GPU and the framework allocator)",
         ("min_samples",), _insufficient, memory=True),
    Rule("creep", "ambiguous", "that source (or the workers') grows steadily (its slope's "
         "interval above "
         "`ok_floor_bytes`, its late third keeping `live_decay_ratio` of the rate), but "
         "too little yet for either leak rule: a small leak or a cache still filling; "
         "the cell runs again until its growth at that rate would pass twice its floor",
         ("ok_floor_bytes", "live_min_growth_bytes", "live_decay_ratio",
          "heap_floor_bytes"), _creep, memory=True),
    Rule("unsure", "ambiguous", "that source (or the workers') neither clearly grows nor "
         "is stable (its "
         "late window too noisy to tell growing from stopped)",
         ("confidence", "late_confidence"), _unsure, memory=True),
    Rule("unconfirmed", "ambiguous", "RSS leaks and USS is not stable: page cache and "
         "file-backed pages move RSS alone", (), _unconfirmed, memory=True),
    Rule("regression", "regression", "against the row's baseline: slower in interleaved "
         "rounds, or peak RSS `peak_regression_ratio` times the baseline's",
         ("peak_regression_ratio", "recheck_share"),
         lambda ev: "baseline" if ev.facts.regression else None),
    Rule(UNSETTLED, "ambiguous", "against the row's baseline: interleaved rounds ran "
         "for a doubt about a slowdown (suspected slower, or a host busy for "
         "`recheck_share` of the steps) and left it open: two or more counted, confirmed "
         "nothing, and their interval reaches past `min_ratio` (a slowdown fits them as "
         "well as no change); or fewer than two counted, and every round left out (two at "
         "least: a busy host, rule `round-busy`, or CPU speeds apart) read the suspect "
         "slower past `min_ratio`, a slowdown load did not make: no answer, never `ok`",
         ("busy_share", "recheck_share", "busy_min_ratio", "min_ratio"),
         lambda ev: "baseline" if ev.facts.unsettled else None),
    Rule(SUSPECTED, "suspected", "pooled step times slower than the baseline's, with no "
         "rounds to confirm it (`rounds: 0`)", ("alpha", "min_ratio"),
         lambda ev: "baseline" if ev.facts.suspected else None),
    Rule("plateau", "plateau", "a source grew past its floor, then its late slope's upper "
         "bound fell under `stall_fraction` of the rate or would not pass the floor",
         ("stall_fraction", "leak_floor_bytes", "heap_floor_bytes"), _plateau, memory=True),
    Rule("ok", "ok", "none of the above: memory stable, with the smallest steady leak the "
         "run could have missed said (\"no leak above 40 B/call in 1,000 calls\"), and no "
         "slowdown", ("live_floor_bytes",), _ok, memory=True),
)
RULE_IDS = tuple(r.id for r in RULES)
MEMORY_RULES = tuple(r for r in RULES if r.memory)
# Ids recorded before the one table, and the rule each is now.
FORMER_IDS = {"ended": "crash", "vs-baseline-regression": "regression",
              "vs-baseline-suspected": "suspected"}


def first_rule(ev: Evidence, rules: tuple[Rule[Evidence], ...] = RULES
               ) -> tuple[Rule[Evidence], str]:
    """The first rule of `rules` (the verdict's table) that fires, and what it names."""
    return first_of(ev, rules)


def memory_rule(ev: Evidence) -> tuple[Rule[Evidence], str]:
    """The first of the memory rules that fires: what memory alone says."""
    return first_rule(ev, MEMORY_RULES)


def rule_named(rule_id: str) -> Rule[Evidence] | None:
    """The rule of that id (an id recorded before the one table: the rule it is now)."""
    rid = FORMER_IDS.get(rule_id, rule_id)
    return next((r for r in RULES if r.id == rid), None)


def figures(t: MemoryTrend, cfg: AnalysisConfig) -> str:
    """A source's figures, as --why prints them, with whether the per-call rule holds."""
    if t.kind == "insufficient":
        return f"{t.source}: {t.n} readings, too few"
    per_call = ("not applied (pages move it)" if t.source in TOTAL_ONLY
                else "holds" if steady_above_trend(t, cfg) else "does not hold")
    return (f"{t.source}: {t.kind}, {t.slope:+,.0f} B/call (CI {t.slope_lo:+,.0f}.."
            f"{t.slope_hi:+,.0f}), late {t.late_slope:+,.0f} (CI {t.late_lo:+,.0f}.."
            f"{t.late_hi:+,.0f}), grew {t.end - t.start:+,.0f} B, floor {t.floor:,.0f} B, "
            f"{t.n} readings; per-call rule (CI above {cfg.live_floor_bytes:,.0f} B/call, "
            f"late >= {cfg.live_decay_ratio:g} x rate) {per_call}")


def facts_said(f: Facts) -> list[str]:
    """The facts beside memory, as --why prints them (those that are so)."""
    said = [("unavailable", f.unavailable), ("safety stop", f.runaway or None),
            ("GPU precheck", f.precheck),
            ("ended", f"{f.ended} ({f.ended_why})" if f.ended else None),
            ("GPU in the run", f.gpu_unusable),
            ("a fill fits", ", ".join(f.filling)), ("steps", f.slowdown),
            ("cut short", f.short or None),
            ("first look", f"a run of {f.rising:,} calls would show it last" if f.rising
             else None), ("one run", f.once or None),
            ("busy host", f.busy), ("vs baseline", f.regression or f.suspected),
            ("rounds", f.unsettled or None)]
    return [f"{name}: {value}" for name, value in said if value]


def why(ev: Evidence, cfg: AnalysisConfig) -> list[str]:
    """Every rule in order with whether it fired, after the figures and other facts."""
    out = [f"  {figures(t, cfg)}" for t in ev.memory.values()]
    out += [f"  {line}" for line in facts_said(ev.facts)]
    decided = False
    for k, rule in enumerate(RULES, 1):
        named = rule.test(ev)
        if named is not None and not decided:
            state, decided = f"fired ({named}): decides {rule.says}", True
        elif rule is RULES[-1]:
            # The last rule is "none of the above": after a decision it is never reached.
            state = "not reached: an earlier rule decided"
        elif named is not None:
            state = f"would fire ({named}), but an earlier rule decided"
        else:
            state = "did not fire"
        out.append(f"{k}. {rule.id}: {state}; when {rule.when}")
    return out


# What a live look does.
STOP_LEAK, STOP_OK, RUN_ON = "stop: leak", "stop: ok", "run on"
# What a round does.
COUNTS, LEFT_OUT = "counts", "left out"


@dataclass(frozen=True)
class LiveEvidence:
    """What a live look read of the samples so far (`sequential.decided`).

    Attributes:
        leak, grown: the carrier of a leak the memory rules read ("" none), and its growth.
        flat, upper: the first needed source where memory reads `ok` ("" not so); the highest
            upper bound of the needed sources' slopes, whole and late.
        measured: the share of its run measured (`sequential.LiveDecider.share`).
        large, floor, ok_share: `leak_large_bytes`, `ok_floor_bytes`, `live_ok_share`.
        rose: the step times so far rose; lazy, as it reads every step.
    """

    leak: str = ""
    grown: float = 0.0
    large: float = 0.0
    flat: str = ""
    upper: float = float("inf")
    floor: float = 0.0
    measured: float = 1.0
    ok_share: float = 0.0
    rose: Callable[[], bool] = bool

    @property
    def stable(self) -> str:
        """The first needed source, where every slope interval lies under the floor."""
        return self.flat if self.flat and self.upper < self.floor else ""


LIVE_RULES: tuple[Rule[LiveEvidence], ...] = (
    Rule("live-leak", STOP_LEAK, "the memory rules read a leak (rule `leak`) and its "
         "carrier grew past `leak_large_bytes`: growth that matters whatever it is; a "
         "smaller one runs on to its budget, which may still show it level off",
         ("leak_large_bytes",),
         lambda ev: ev.leak if ev.leak and ev.grown >= ev.large else None),
    Rule("live-early", RUN_ON, "memory reads flat, but the run has measured less than "
         "`live_ok_share` of its length (its time budget, and the least calls a slow "
         "step's run goes on to past it; or its cap): growth that starts later reads flat "
         "until it starts. A full run reads a leak only where growth started before 1/√2 (0.71) "
         "of it: both leak rules need its whole slope, a median over pairs of readings, "
         "above zero, so half the pairs must end past the start; by 0.8, growth that "
         "started by 0.71 fills enough of the late third a look reads (`live-ok`)",
         ("live_ok_share",),
         lambda ev: "budget" if ev.stable and ev.measured < ev.ok_share else None),
    Rule("live-rising", RUN_ON, "memory reads flat, but the step times so far rose "
         "(late slower than early): an `ok` is no slowdown too, read over the whole run",
         (), lambda ev: "steps" if ev.stable and ev.rose() else None),
    Rule("live-ok", STOP_OK, "every needed source's slope interval, over the run so far "
         "and over its late third, lies under `ok_floor_bytes` (the heap, the GPU and the "
         "framework's allocator where read, else USS and RSS; the worker processes' USS "
         "wherever any sample carried it)",
         ("ok_floor_bytes",), lambda ev: ev.stable or None),
    Rule("live-run-on", RUN_ON, "none of the above: the run goes on to its budget or its "
         "cap", (), lambda ev: "run"),
)


@dataclass(frozen=True)
class RoundEvidence:
    """What a confirmation round's two runs showed (`baseline.judged`).

    Attributes:
        failed: why a run of the round failed or measured no step ("" none).
        plain, scaled: suspect over baseline step time, less run-queue delay, at one CPU speed.
        speed, cpu: the suspect's CPU speed and CPU time per step over the baseline's (None: no).
        busy: each run's run-queue share of its step time, by name (None: not recorded).
    """

    cfg: AnalysisConfig = field(default_factory=AnalysisConfig)
    failed: str = ""
    plain: float = math.nan
    scaled: float = math.nan
    speed: float | None = None
    busy: tuple[tuple[str, float | None], ...] = ()
    cpu: float | None = None


def side(ratio: float, cfg: AnalysisConfig) -> int:
    """Which side of the no-change band a ratio lies on: 1 slower, -1 faster, 0 within
    [1/`min_ratio`, `min_ratio`]."""
    return 1 if ratio > cfg.min_ratio else -1 if ratio < 1 / cfg.min_ratio else 0


def speeds_apart(ev: RoundEvidence) -> str | None:
    """Why the runs' CPU speeds leave the round out (rule `round-speeds`), or None: the
    speeds were close, or the ratio lies on the same side of `min_ratio` either way."""
    c, speed = ev.cfg, ev.speed
    if speed is None or 1 / c.speed_spread <= speed <= c.speed_spread:
        return None
    if not (ev.plain > 0 and ev.scaled > 0) or side(ev.plain, c) == side(ev.scaled, c):
        return None
    return (f"host busy: the suspect run's CPU ran at {speed:.2f}x the baseline run's "
            f"speed (the canary loop), and the change rests on that: {ev.plain:.2f}x as "
            f"measured, {ev.scaled:.2f}x at one speed")


def busy_run(ev: RoundEvidence) -> str | None:
    """Why the round ran on a busy host (rule `round-busy`), or None."""
    for name, share in ev.busy:
        if share is not None and share >= ev.cfg.busy_share:
            return f"host busy: run-queue delay {share:.0%} of the {name} run's step time"
    return None


def cpu_agrees(ev: RoundEvidence) -> bool:
    """CPU time per step reads what the wall clock (at one CPU speed) does: both within
    `min_ratio`, or both past `busy_min_ratio` the same way."""
    cpu, wall, c = ev.cpu, ev.scaled, ev.cfg
    if cpu is None or not (math.isfinite(wall) and wall > 0):
        return False
    return side(cpu, c) == side(wall, c) and (side(wall, c) == 0 or min(
        max(cpu, 1 / cpu), max(wall, 1 / wall)) >= c.busy_min_ratio)


ROUND_RULES: tuple[Rule[RoundEvidence], ...] = (
    Rule("round-failed", LEFT_OUT, "a run of the round failed or measured no step", (),
         lambda ev: ev.failed or None),
    Rule("round-speeds", LEFT_OUT, "its two runs ran at CPU speeds more than "
         "`speed_spread` apart, and the change rests on putting them at one speed (as "
         "measured and at one speed on different sides of `min_ratio`): that holds for "
         "CPU-bound work only", ("speed_spread", "min_ratio"), speeds_apart),
    Rule("round-busy-agrees", COUNTS, "a run waited for a CPU `busy_share` of its step "
         "time or more, but CPU time per step (no waiting in it) reads what the wall "
         "clock does: both no change (within `min_ratio`), or both a change past "
         "`busy_min_ratio`, which load does not make: the change is the step's own",
         ("busy_share", "min_ratio", "busy_min_ratio"),
         lambda ev: "cpu" if busy_run(ev) and cpu_agrees(ev) else None),
    Rule("round-busy", LEFT_OUT, "a run waited for a CPU `busy_share` of its step time or "
         "more (a busy host), and CPU time per step does not agree or was not recorded: "
         "load can make that change", ("busy_share",), busy_run),
    Rule("round", COUNTS, "none of the above", (), lambda ev: "round"),
)


AS_READ, BY_CAP, BY_BUDGET = "as read", "cut short by its cap", "cut short by its budget"


@dataclass(frozen=True)
class LengthEvidence:
    """Whether a run's end cut its reading short (`decision.read_run`).

    Attributes:
        again: the cell may run again (repeats left, no `--iterations`).
        capped, ended: its cap (most budget left) or its budget ended it, in words.
        grown, room: what the largest leaking carrier grew; the calls a run again may make
            within the `overrun` bound (each None: none).
        done, asked: the calls it made, and its cap.
    """

    cfg: AnalysisConfig
    again: bool = False
    capped: str = ""
    grown: float | None = None
    ended: str = ""
    done: int = 0
    asked: int = 0
    room: int | None = None


# A budgeted, bounded run undecided between a leak and a large cache runs again this many
# times its calls (as `memory.FILL_RERUN`).
LENGTH_FILL = 4


def fill_asks(ev: LengthEvidence) -> int:
    """The calls rule `length-fill` asks: LENGTH_FILL times those made, at least
    `short_calls`, at most the cap, and few enough to keep the growth under
    `leak_large_bytes`, where a live look would stop the run anyway."""
    asks = min(max(LENGTH_FILL * ev.done, ev.cfg.short_calls), ev.asked)
    if ev.grown is not None and ev.grown > 0 and ev.done > 0:
        asks = min(asks, int(ev.done * ev.cfg.leak_large_bytes / ev.grown))
    return asks


def fill_fits(ev: LengthEvidence) -> bool:
    """Whether rule `length-fill`'s run again fits the `overrun` bound and makes at least
    twice the calls made."""
    asks = fill_asks(ev)
    return ev.room is not None and asks >= 2 * ev.done and ev.room >= asks


LENGTH_RULES: tuple[Rule[LengthEvidence], ...] = (
    Rule("length-last", AS_READ, "its repeats are spent, or `--iterations` bounds its "
         "runs (no re-run): what it read stands", (),
         lambda ev: "run" if not ev.again else None),
    Rule("length-cap", BY_CAP, "its cap on calls ended it with over half its time budget "
         "left (the verdict's rule `capped`, where a carrier leaks)", (),
         lambda ev: ev.capped or None),
    Rule("length-no-leak", AS_READ, "no carrier leaks", (),
         lambda ev: "memory" if ev.grown is None else None),
    Rule("length-large", AS_READ, "the leak grew `leak_large_bytes` or more: growth that "
         "matters whatever it is", ("leak_large_bytes",),
         lambda ev: "leak" if ev.grown is not None and
         ev.grown >= ev.cfg.leak_large_bytes else None),
    Rule("length-fill", BY_BUDGET, "its budget ended it, and the cell's `overrun` bound "
         "(the pytest plugin's, `harness.check`'s) leaves room for a run of 4 times its "
         "calls (`short_calls` at least; at least twice, as many as keep the growth under "
         "`leak_large_bytes` at its rate): a cache of more entries than it made calls "
         "fills like a leak for all of them, and the bound is what the user gave to tell "
         "them apart (a sweep's cell, unbounded, reads a leak as it is): the verdict's "
         "rule `short`, asking those calls", ("short_calls", "leak_large_bytes"),
         lambda ev: ev.ended if ev.ended and ev.done < ev.asked and fill_fits(ev)
         else None),
    Rule("length-short", BY_BUDGET, "its budget ended it after fewer than `short_calls` "
         "calls (its cap, if lower): the verdict's rule `short`", ("short_calls",),
         lambda ev: ev.ended if ev.ended and
         ev.done < min(ev.cfg.short_calls, ev.asked) else None),
    Rule("length-enough", AS_READ, "none of the above", (), lambda ev: "run"),
)


AGAIN, STANDS = "runs again", "stands"
# The next attempt's kinds, by the facts of the last (`RerunEvidence.kind`).
CALLS, BUDGET, LONGER, SAME = "calls", "budget", "longer", "same"


@dataclass(frozen=True)
class RerunEvidence:
    """What decides whether an undecided cell runs again, and how (`stages.measure`).

    Attributes:
        undecided: a longer run may settle its verdict (`kinds.RUN_LONGER`).
        spent, script, budgeted: its repeats are spent; a script ran once; it has a time budget.
        asked: `--iterations` was given: the most calls any run of it makes.
        busy, crowded, short, capped: the rule of that name left it undecided.
        seconds, timeout, left: the next attempt's time at this run's pace; the cell's timeout;
            what is left of its `overrun` bound.
        own: the next attempt's time in the cell's own time, which the bound counts (None:
            `seconds`).
    """

    undecided: bool = False
    spent: bool = False
    script: bool = False
    asked: bool = False
    busy: bool = False
    crowded: bool = False
    budgeted: bool = False
    short: bool = False
    capped: bool = False
    seconds: Callable[[str], float] = lambda kind: 0.0
    own: Callable[[str], float] | None = None
    timeout: float = float("inf")
    left: float = float("inf")

    def own_s(self, kind: str) -> float:
        """The next attempt's seconds of a kind in the cell's own time."""
        return (self.own or self.seconds)(kind)

    @property
    def planned(self) -> str:
        """The next attempt the rules would run: "cap" (its cap raised), or `kind`."""
        return "cap" if self.budgeted and self.capped else self.kind

    @property
    def kind(self) -> str:
        """The next attempt its facts call for: more calls (cut short), a longer budget,
        or a longer fixed run."""
        return CALLS if self.budgeted and self.short else BUDGET if self.budgeted else LONGER


RERUN_RULES: tuple[Rule[RerunEvidence], ...] = (
    Rule("rerun-decided", STANDS, "its verdict is decided: not one a longer run may settle "
         "(ambiguous)", (), lambda ev: "verdict" if not ev.undecided else None),
    Rule("rerun-spent", STANDS, "its repeats are spent (`repeats:`)", (),
         lambda ev: "repeats" if ev.spent else None),
    Rule("rerun-script", STANDS, "a whole script ran once: more iterations change nothing",
         (), lambda ev: "script" if ev.script else None),
    Rule("rerun-crowded-past", STANDS, "a wall-clock deadline ended it while the host took "
         "most of its time (rule `timeout-busy`), and at that run's pace the same run "
         "again would pass the cell's timeout too: said, with the timeout that would let "
         "it finish", (), lambda ev: SAME if ev.crowded and ev.seconds(SAME) > ev.timeout
         else None),
    Rule("rerun-crowded", AGAIN, "a wall-clock deadline ended it while the host took "
         "most of its time (rule `timeout-busy`): the same run again (a longer one would "
         "pass the deadline too), where it fits the timeout at that run's pace and "
         "anything is left of its `overrun` bound", (),
         lambda ev: SAME if ev.crowded and ev.left > 0 else None),
    Rule("rerun-busy", AGAIN, "its length was asked on the command line (`--iterations "
         "N`) and a busy host alone left it undecided (rule `busy-host`): the same run "
         "again, within N calls (a longer one is no cure for a busy host), where it fits "
         "the cell's timeout and what is left of its `overrun` bound", (),
         lambda ev: SAME if ev.asked and ev.busy and
         ev.seconds(SAME) <= min(ev.timeout, ev.left) else None),
    Rule("rerun-asked", STANDS, "its length was asked on the command line (`--iterations "
         "N`): every run of the cell stays within N calls, and a re-run is longer: said, "
         "with `--iterations` to raise", (), lambda ev: "iterations" if ev.asked else None),
    Rule("rerun-overrun", STANDS, "the next attempt (below) would take past what is left "
         "of the cell's `overrun` bound (its budget times `overrun`, its attempts "
         "together) at the pace its run made, in its own time (no rise carried on: the "
         "next run's own end holds the bound): decided as if its repeats were spent; "
         "still undecided, its budget was too short for a verdict, said in its reason "
         "with the budget that would decide; decided, its reason says it was not run "
         "again (a first attempt's slowdown: "
         "unconfirmed, rule `rising`'s run twice as long left out)", (),
         lambda ev: ev.planned if math.isfinite(ev.left) and ev.own_s(ev.planned) > ev.left
         else None),
    Rule("rerun-cap", AGAIN, "its cap, not its budget, ended it (rule `capped`): the same "
         "budget, its cap raised to what the budget holds at this pace (or the calls the "
         "verdict asks, if more)", (), lambda ev: "cap" if ev.budgeted and ev.capped else None),
    Rule("rerun-timeout", STANDS, "the next attempt (below) would take past the cell's "
         "timeout at this run's pace: said, with `timeout:` to raise", (),
         lambda ev: ev.kind if ev.seconds(ev.kind) > ev.timeout else None),
    Rule("rerun-calls", AGAIN, "its budget ended it after too few calls (rule `short`): "
         "the same budget, run until the calls the rule asks", (),
         lambda ev: CALLS if ev.kind == CALLS else None),
    Rule("rerun-budget", AGAIN, "a budgeted run: its budget times 2, or the calls the "
         "verdict asks over the calls made (4 where a filling cache could explain the "
         "growth), its cap alike; the calls asked are made whatever their pace (a busy "
         "host, or steps that slow as the run goes)", (),
         lambda ev: BUDGET if ev.kind == BUDGET else None),
    Rule("rerun-longer", AGAIN, "a run of fixed length: twice the calls, or the calls the "
         "verdict asks (a fill 4x, a creep what passes its floor), and at least what "
         "deciding from step samples needs", (), lambda ev: LONGER),
)


def rerun_rule(ev: RerunEvidence) -> tuple[Rule[RerunEvidence], str]:
    """The re-run's rule that fires on `ev`, and what it names."""
    return first_of(ev, RERUN_RULES)


def runs_again(calls: int) -> str:
    """Rule `short`'s or `capped`'s words for the run again it asks."""
    return f"running it again for {calls:,} calls"


def would_tell(calls: int) -> str:
    """The same where the cell is not run again (`stages.measure`: past its bound)."""
    return f"a run of {calls:,} calls would tell"


def reach_s(steps: StepTrend | None, ran: int, measured_s: float, calls: int) -> float:
    """Seconds a fresh run takes for `calls` calls at the pace of one that made `ran` in
    `measured_s`, with the early-to-late rise in step time carried on (quadratic)."""
    if calls <= 0 or ran <= 0 or measured_s <= 0:
        return 0.0
    early = steps.early_median_s if steps is not None else 0.0
    late = steps.late_median_s if steps is not None else 0.0
    if not (early > 0 and late > early):
        return measured_s * calls / ran

    def model(n: float) -> float:        # a step's time rising from early to late
        return early * n + (late - early) * n * n / (2 * ran)

    return measured_s * model(calls) / model(ran)


def fill_calls(cfg: AnalysisConfig, rule: str, ran: int, cap: int) -> int:
    """The calls a budgeted rerun of a `filling` cell under `short_calls` makes at least:
    what rule `short` would ask next, asked now to save a run; 0 for any other rule."""
    return min(cfg.short_calls, cap) if rule == FILLING and ran < cfg.short_calls else 0


FEW, FLAT, UNSTEADY, BACK, SLOWDOWN = ("too few", "flat", "not bin after bin", "came back",
                                       "slowdown")
VOIDED = "busy host"


@dataclass(frozen=True)
class StepEvidence:
    """A run's step times (`n` of them), early against late (`stepreading.step_trend`).

    Attributes:
        p_value, ratio: one-sided Mann-Whitney p (late slower), and the ratio of medians.
        rise_s, trend_p: late less early median (s); one-sided Kendall p over bin medians.
        back: where the rise came back down (a step index; 0: it did not); lazy.
    """

    cfg: AnalysisConfig
    n: int
    p_value: float = 1.0
    ratio: float = 1.0
    rise_s: float = 0.0
    trend_p: float = 1.0
    back: Callable[[], int] = int

    @classmethod
    def of(cls, t: StepTrend, cfg: AnalysisConfig) -> StepEvidence:
        """A trend's own figures as the table reads them."""
        return cls(cfg, t.n, t.p_value, t.ratio, t.late_median_s - t.early_median_s,
                   t.trend_p, lambda: t.came_back_at)


def _flat(ev: StepEvidence) -> str | None:
    c = ev.cfg
    rose = ev.p_value < c.alpha and ev.ratio > c.min_ratio and ev.rise_s >= c.step_floor_s
    return None if rose else "steps"


def _back(ev: StepEvidence) -> str | None:
    at = ev.back()
    return f"step {at:,}" if at else None


STEP_RULES: tuple[Rule[StepEvidence], ...] = (
    Rule("steps-too-few", FEW, "fewer step times than `min_step_samples`: no evidence "
         "either way", ("min_step_samples",),
         lambda ev: "steps" if ev.n < ev.cfg.min_step_samples else None),
    Rule("steps-flat", FLAT, "late steps (the last `step_window`) not slower than early "
         "ones: the one-sided Mann-Whitney p not under `alpha`, the ratio of medians not "
         "past `min_ratio`, or the medians under `step_floor_s` apart",
         ("step_window", "alpha", "min_ratio", "step_floor_s"), _flat),
    Rule("steps-unsteady", UNSTEADY, "late steps slower, but not rising bin after bin "
         "(the one-sided Kendall tau over bin medians not under `alpha`): a host that "
         "drifts between fast and slow regimes only happens to end slower", ("alpha",),
         lambda ev: "bins" if not ev.trend_p < ev.cfg.alpha else None),
    Rule("steps-came-back", BACK, "rising bin after bin, but a bin of the last 40 % of "
         "the run lies under half the rise by 4 standard errors of its median: a cost "
         "that cycles with the scenario's input, not a slowdown that lasts", (), _back),
    Rule("steps-slowdown", SLOWDOWN, "none of the above: late steps slower, rising bin "
         "after bin, and lasting", (), lambda ev: "steps"),
)


def rose(ev: StepEvidence) -> bool:
    """Late steps slower than early ones: what a slowdown needs first, and what keeps a
    live look from stopping a run `ok`."""
    return first_of(ev, STEP_RULES)[0].says not in (FEW, FLAT)


@dataclass(frozen=True)
class LoadEvidence:
    """A slowdown beside the host's load (`stepreading.read_steps`); None: not recorded.

    Attributes:
        share, extra_s: the share of the extra step time (late less early median) that run-queue
            delay or throttling accounts for, and that time.
        cpu_rise_s, cpu_ratio: CPU time per step's rise, and its late/early ratio.
    """

    cfg: AnalysisConfig
    share: float | None = None
    extra_s: float = 0.0
    cpu_rise_s: float | None = None
    cpu_ratio: float | None = None


LOAD_RULES: tuple[Rule[LoadEvidence], ...] = (
    Rule("load-more-work", STANDS, "CPU time per step rose by half the extra step time "
         "or more: the step did more work, whatever the load", (),
         lambda ev: "cpu" if ev.cpu_rise_s is not None and
         ev.cpu_rise_s >= ev.extra_s / 2 else None),
    Rule("load-cpu-slower", STANDS, "CPU time per step, which holds no waiting, is itself "
         "a slowdown past `busy_min_ratio`: load stretches a step's CPU time by tens of "
         "percent on a shared core, never by a factor, while the time it waits in the "
         "run queue grows with the step (a step doing 6x the work on a host at load 15 "
         "waits 6x longer too)", ("busy_min_ratio",),
         lambda ev: "cpu" if ev.cpu_ratio is not None and
         ev.cpu_ratio >= ev.cfg.busy_min_ratio else None),
    Rule("load-busy", VOIDED, "the rise in run-queue delay or throttling per step "
         "accounts for `contention_share` of the extra step time: the host was busy "
         "(the verdict's rule `busy-host`)", ("contention_share",),
         lambda ev: "host" if ev.share is not None and
         ev.share >= ev.cfg.contention_share else None),
    Rule("load-own", STANDS, "none of the above: the slowdown is the step's own", (),
         lambda ev: "steps"),
)


SLOWER, FASTER, NO_CHANGE = "slower", "faster", "~"
HIGHER, LOWER = "higher", "lower"


@dataclass(frozen=True)
class PooledEvidence:
    """A cell's pooled step times against its baseline's (`baseline.compare_steps`).

    Attributes:
        p_value, ratio, diff_s: Two-sided Mann-Whitney p, ratio and difference (s) of
            the medians.
    """

    cfg: AnalysisConfig
    p_value: float
    ratio: float
    diff_s: float


POOLED_RULES: tuple[Rule[PooledEvidence], ...] = (
    Rule("pooled-unsure", NO_CHANGE, "the two-sided Mann-Whitney p is not under `alpha`: not "
         "significant", ("alpha",),
         lambda ev: "steps" if not ev.p_value < ev.cfg.alpha else None),
    Rule("pooled-within", NO_CHANGE, "the ratio of medians lies within [1/`min_ratio`, "
         "`min_ratio`]", ("min_ratio",),
         lambda ev: "steps" if 1.0 / ev.cfg.min_ratio <= ev.ratio <= ev.cfg.min_ratio
         else None),
    Rule("pooled-floor", NO_CHANGE, "the medians lie under `step_floor_s` apart",
         ("step_floor_s",),
         lambda ev: "steps" if not ev.diff_s >= ev.cfg.step_floor_s else None),
    Rule("pooled-slower", SLOWER, "the ratio of medians past `min_ratio`: a suspected "
         "slowdown, which interleaved rounds confirm", ("min_ratio",),
         lambda ev: "steps" if ev.ratio > ev.cfg.min_ratio else None),
    Rule("pooled-faster", FASTER, "none of the above: the ratio under 1/`min_ratio`", (),
         lambda ev: "steps"),
)


@dataclass(frozen=True)
class PeakEvidence:
    """A cell's peak memory against its baseline's (`baseline.compare_peaks`)."""

    cfg: AnalysisConfig
    ratio: float
    diff: float


PEAK_RULES: tuple[Rule[PeakEvidence], ...] = (
    Rule("peak-within", NO_CHANGE, "the ratio lies within [1/`peak_min_ratio`, "
         "`peak_min_ratio`]", ("peak_min_ratio",),
         lambda ev: "peak" if 1.0 / ev.cfg.peak_min_ratio <= ev.ratio <= ev.cfg.peak_min_ratio
         else None),
    Rule("peak-floor", NO_CHANGE, "the peaks differ by `peak_floor_bytes` or less",
         ("peak_floor_bytes",),
         lambda ev: "peak" if not ev.diff > ev.cfg.peak_floor_bytes else None),
    Rule("peak-higher", HIGHER, "the ratio past `peak_min_ratio`: reported",
         ("peak_min_ratio",),
         lambda ev: "peak" if ev.ratio > ev.cfg.peak_min_ratio else None),
    Rule("peak-lower", LOWER, "none of the above: the ratio under 1/`peak_min_ratio`", (),
         lambda ev: "peak"),
)


@dataclass(frozen=True)
class PeakVerdictEvidence:
    """A peak comparison as the row's verdict reads it: its direction and ratio."""

    cfg: AnalysisConfig
    direction: str = NO_CHANGE
    ratio: float = 1.0


REGRESSION, NOTED = "regression", "noted"
PEAK_VERDICT_RULES: tuple[Rule[PeakVerdictEvidence], ...] = (
    Rule("peak-regression", REGRESSION, "peak RSS higher (rule `peak-higher`) and "
         "`peak_regression_ratio` times the baseline's or more: the verdict's rule "
         "`regression`", ("peak_regression_ratio",),
         lambda ev: "peak" if ev.direction == HIGHER and
         ev.ratio >= ev.cfg.peak_regression_ratio else None),
    Rule("peak-noted", NOTED, "none of the above: a higher peak is reported, no "
         "regression", (), lambda ev: "peak"),
)


@dataclass(frozen=True)
class DoubtEvidence:
    """The pooled comparison as the row asks whether rounds settle it.

    Attributes:
        direction: The pooled step times' direction ("" without step times).
        busy: The worse of the two cells' run-queue delay shares.
    """

    cfg: AnalysisConfig
    direction: str = ""
    busy: float = 0.0


DOUBT, NO_DOUBT = "doubt: rounds", "no doubt"
DOUBT_RULES: tuple[Rule[DoubtEvidence], ...] = (
    Rule("doubt-none-timed", NO_DOUBT, "either cell measured no step time: nothing to "
         "compare", (), lambda ev: "steps" if not ev.direction else None),
    Rule("doubt-suspected", DOUBT, "the pooled step times suspect a change (rule "
         "`pooled-slower` or `pooled-faster`): interleaved rounds confirm it or not", (),
         lambda ev: ev.direction if ev.direction != NO_CHANGE else None),
    Rule("doubt-busy", DOUBT, "either cell ran with a run-queue delay of `recheck_share` "
         "of its step time or more: load can hide a change as well as fake one",
         ("recheck_share",),
         lambda ev: "host" if ev.busy >= ev.cfg.recheck_share else None),
    Rule("doubt-none", NO_DOUBT, "none of the above: the pooled comparison stands", (),
         lambda ev: "steps"),
)


# Rounds that must count to confirm a change: two agree by chance on a busy host (an A/A
# pair beside CI's suite read 1.25x and 1.25x; benchmarks/aa_rounds.py, docs/benchmarks.md).
CONFIRM_ROUNDS = 3
# From this many rounds that count, one may read against the change the interval clears
# (beside two busy loops a real 1.6x slowdown read 0.97x once and 1.35-1.42x five times;
# on the recorded A/A rounds it confirmed nothing false, as every round did not).
AGAINST_FROM = 5


@dataclass(frozen=True)
class ConfirmEvidence:
    """The rounds that count, as their confirmation reads them (`baseline.decide_rounds`).

    Attributes:
        ratios, lo, hi: each usable round's ratio, and the mean's `round_confidence` interval.
        diff_s: the median absolute step-time difference of the rounds (seconds).
        least: the rounds that must count to confirm a direction (`CONFIRM_ROUNDS`, or
            fewer where the rounds asked for allow fewer).
    """

    cfg: AnalysisConfig
    ratios: Sequence[float] = ()
    lo: float = math.nan
    hi: float = math.nan
    diff_s: float = math.nan
    least: int = CONFIRM_ROUNDS

    def reads(self) -> str:
        """The direction the rounds and the interval read, whatever the rounds' count:
        every round agrees, or all but one where `AGAINST_FROM` or more count."""
        against = 1 if len(self.ratios) >= AGAINST_FROM else 0
        if sum(r <= 1 for r in self.ratios) <= against and self.lo > self.cfg.min_ratio:
            return SLOWER
        if sum(r >= 1 for r in self.ratios) <= against and self.hi < 1.0 / self.cfg.min_ratio:
            return FASTER
        return NO_CHANGE


FEW_ROUNDS = "too few rounds"
CONFIRM_RULES: tuple[Rule[ConfirmEvidence], ...] = (
    Rule("confirm-few", FEW_ROUNDS, "fewer than two rounds count: not confirmed", (),
         lambda ev: "rounds" if len(ev.ratios) < 2 else None),
    Rule("confirm-floor", NO_CHANGE, "the rounds' step times differ by less than "
         "`step_floor_s` (their median difference)", ("step_floor_s",),
         lambda ev: "rounds" if not ev.diff_s >= ev.cfg.step_floor_s else None),
    Rule("confirm-short", NO_CHANGE, "the rounds read a change as `confirm-slower` or "
         "`confirm-faster` would, but fewer than three count (two where `rounds: 1` runs "
         "only two): two rounds agree by chance on a busy host (an A/A pair beside a test "
         "suite read 1.25x, 1.25x); another round is run", (),
         lambda ev: "rounds" if len(ev.ratios) < ev.least and ev.reads() != NO_CHANGE
         else None),
    Rule("confirm-slower", SLOWER, "every round that counts reads the suspect slower (all "
         "but one where five or more count), and the `round_confidence` interval of the "
         "mean ratio lies above `min_ratio`",
         ("round_confidence", "min_ratio"),
         lambda ev: "rounds" if ev.reads() == SLOWER else None),
    Rule("confirm-faster", FASTER, "every round that counts reads it faster (all but "
         "one where five or more count), and the interval lies under 1/`min_ratio`",
         ("round_confidence", "min_ratio"),
         lambda ev: "rounds" if ev.reads() == FASTER else None),
    Rule("confirm-none", NO_CHANGE, "none of the above: no change confirmed", (),
         lambda ev: "rounds"),
)


@dataclass(frozen=True)
class SettledEvidence:
    """The rounds so far (`baseline.settled`).

    Attributes:
        suspected, direction: the direction put to the test ("~": a busy host asked), and so far.
        ratios, lo, hi: each usable round's ratio, and their mean's interval.
    """

    cfg: AnalysisConfig
    suspected: str = NO_CHANGE
    direction: str = NO_CHANGE
    ratios: Sequence[float] = field(default_factory=tuple)
    lo: float = math.nan
    hi: float = math.nan

    @classmethod
    def of(cls, conf: Confirmation, cfg: AnalysisConfig) -> SettledEvidence:
        """A confirmation's rounds as the table reads them."""
        usable = [r.ratio for r in conf.rounds if r.excluded is None and r.base_s > 0
                  and r.other_s > 0]
        return cls(cfg, conf.suspected, conf.direction, usable, conf.lo, conf.hi)


SETTLED, MORE = "settled", "another round"
SETTLED_RULES: tuple[Rule[SettledEvidence], ...] = (
    Rule("settled-few", MORE, "fewer than two rounds count yet", (),
         lambda ev: "rounds" if len(ev.ratios) < 2 else None),
    Rule("settled-confirmed", SETTLED, "a direction is confirmed (rule `confirm-slower` "
         "or `confirm-faster`)", (),
         lambda ev: ev.direction if ev.direction != NO_CHANGE else None),
    Rule("settled-disagree", SETTLED, "only an improvement was in doubt, and rounds that "
         "count disagree in direction: every round must agree to confirm it (a doubt about "
         "a slowdown runs on, where more rounds may still settle it as no change)", (),
         lambda ev: "rounds" if ev.suspected == FASTER and any(x > 1 for x in ev.ratios)
         and any(x < 1 for x in ev.ratios) else None),
    Rule("settled-unchanged", SETTLED, "the interval lies wholly on the no-change side of "
         "the question's threshold: under `min_ratio` for a slowdown (or a busy host), "
         "above 1/`min_ratio` for an improvement", ("min_ratio",),
         lambda ev: "rounds" if (ev.lo > 1.0 / ev.cfg.min_ratio if ev.suspected == FASTER
                                 else ev.hi < ev.cfg.min_ratio) else None),
    Rule("settled-open", MORE, "none of the above: another round may change the answer "
         "(up to twice `rounds`)", (), lambda ev: "rounds"),
)


@dataclass(frozen=True)
class UnsettledEvidence:
    """Rounds run for a doubt about a slowdown, as rule `unsettled` reads them.

    Attributes:
        suspected, direction, rule: as in `SettledEvidence`; the rule of `CONFIRM_RULES`.
        rounds, counted, asked: those run, the timed ones that counted, those asked (0: unknown).
        out, lo, hi: the ratios of the timed rounds left out; the counted ones' interval.
        busy, why: all left out for a busy host; each reason for leaving out, once.
    """

    cfg: AnalysisConfig
    suspected: str = NO_CHANGE
    direction: str = NO_CHANGE
    rounds: int = 0
    counted: int = 0
    out: Sequence[float] = ()
    busy: bool = False
    rule: str = ""
    lo: float = math.nan
    hi: float = math.nan
    why: Sequence[str] = ()
    asked: int = 0

    @classmethod
    def of(cls, conf: Confirmation, cfg: AnalysisConfig, asked: int = 0
           ) -> UnsettledEvidence:
        """A confirmation's rounds as the table reads them (`asked`: rounds asked for)."""
        timed = [r for r in conf.rounds if r.base_s > 0 and r.other_s > 0]
        out = [r for r in timed if r.excluded is not None]
        busy = all(r.excluded and r.excluded.startswith("host busy") for r in out)
        why = dict.fromkeys(LEFT_OUT_WHY.get(r.rule, "a run failed") for r in conf.rounds
                            if r.excluded is not None or r.base_s <= 0 or r.other_s <= 0)
        return cls(cfg, conf.suspected, conf.direction, len(conf.rounds),
                   len(timed) - len(out), [r.ratio for r in out], busy, conf.rule,
                   conf.lo, conf.hi, tuple(why), asked)


# Why a round was left out, by its rule (`ROUND_RULES`).
LEFT_OUT_WHY = {"round-busy": "host busy", "round-speeds": "CPU speeds apart",
                "round-failed": "a run failed"}


def _unsettled(ev: UnsettledEvidence) -> str:
    why = "host busy" if ev.busy else "host busy or runs failed"
    return (f"{why}: {ev.rounds - ev.counted} of {ev.rounds} confirmation rounds left out, "
            f"{ev.counted} counted, 2 needed, every one left out {min(ev.out):.2f}x slower "
            "or more; sweep it again on a quieter host")


def _open(ev: UnsettledEvidence) -> str | None:
    """Why counted rounds settle nothing: they confirmed nothing and their interval
    reaches past `min_ratio`, with what would settle it; None if not so."""
    limit = ev.cfg.min_ratio
    if not (ev.counted >= 2 and ev.rule in ("confirm-none", "confirm-short")
            and ev.hi > limit):
        return None
    holds = (f"holds both no change and a slowdown past {limit:g}x" if ev.lo <= limit
             else f"lies past {limit:g}x, but rounds read the suspect no slower (one "
             f"may, of {AGAINST_FROM} or more that count)")
    left = ev.rounds - ev.counted
    more = f"`rounds: {2 * ev.asked}`" if ev.asked else "a larger `rounds:`"
    return (f"the rounds' interval ({ev.lo:.2f}..{ev.hi:.2f}) {holds}: {ev.rounds} rounds "
            f"ran, {ev.counted} counted, {left} left out"
            + (f" ({', '.join(ev.why)})" if left and ev.why else "")
            + f"; more rounds ({more} in the matrix's `defaults:`, or a check's "
            "`settings`) or a quieter host would settle it")


ANSWERED = "answered"
UNSETTLED_RULES: tuple[Rule[UnsettledEvidence], ...] = (
    Rule("unsettled-faster", ANSWERED, "only an improvement was in doubt: it changes no "
         "verdict, unless its rounds leave a slowdown open (rule `unsettled-open`: a busy "
         "host's pooled runs read a real 1.6x slowdown faster, its rounds 1.41x and 1.65x)",
         ("min_ratio",),
         lambda ev: "rounds" if ev.suspected == FASTER and _open(ev) is None else None),
    Rule("unsettled-confirmed", ANSWERED, "the rounds confirmed a direction", (),
         lambda ev: ev.direction if ev.direction != NO_CHANGE else None),
    Rule("unsettled-open", UNSETTLED, "two rounds or more counted, confirmed nothing (rule "
         "`confirm-none` or `confirm-short`), and their interval reaches past `min_ratio`: "
         "a slowdown fits them as well as no change does (rounds that disagree run on, up "
         "to twice `rounds`), so no answer, never `ok`: more rounds or a quieter host "
         "settle it",
         ("min_ratio",), _open),
    Rule("unsettled-counted", ANSWERED, "two rounds or more counted, and their interval "
         "lies under `min_ratio` (or their step times within `step_floor_s`): their answer "
         "stands", (), lambda ev: "rounds" if ev.counted >= 2 else None),
    Rule("unsettled-few-out", ANSWERED, "fewer than two rounds were left out", (),
         lambda ev: "rounds" if len(ev.out) < 2 else None),
    Rule("unsettled-load", ANSWERED, "a round left out read the suspect `min_ratio` or "
         "less: load alone makes such rounds (a clean pair on a loaded host read 0.57x, "
         "1.10x, 1.61x), no slowdown stands behind them", ("min_ratio",),
         lambda ev: "rounds" if any(r <= ev.cfg.min_ratio for r in ev.out) else None),
    Rule("unsettled-rounds", UNSETTLED, "none of the above: every round left out (two at "
         "least) read the suspect slower past `min_ratio`, a slowdown load did not make: "
         "the verdict's rule `unsettled`", (), _unsettled),
)


def unsettled(conf: Confirmation, cfg: AnalysisConfig, asked: int = 0) -> str:
    """Why rounds run for a doubt about a slowdown settled nothing, or "" where they did
    (`UNSETTLED_RULES`). `asked`: the rounds the settings asked for (0: not known)."""
    rule, named = first_of(UnsettledEvidence.of(conf, cfg, asked), UNSETTLED_RULES)
    return named if rule.says == UNSETTLED else ""


class Table(NamedTuple):
    """One table in `TABLES`: its key (`--why`'s name), its name (docs/verdicts.md's
    marks), its rules, and the column head for what a rule does."""

    key: str
    name: str
    rules: tuple[Rule[Any], ...]
    says: str


# Every table of rules, in reading order; `doc_with_rules` and `--why` read it.
TABLES: tuple[Table, ...] = (
    Table("verdict", "the verdict's", RULES, "decides"),
    Table("live", "the live look's", LIVE_RULES, "the run"),
    Table("round", "the rounds'", ROUND_RULES, "the round"),
    Table("rerun", "the re-runs'", RERUN_RULES, "the cell"),
    Table("trend", "the memory kinds'", TREND_RULES, "the source's kind"),
    Table("garbage", "the collection's", GARBAGE_RULES, "the heap"),
    Table("length", "the length's", LENGTH_RULES, "the reading"),
    Table("steps", "the step times'", STEP_RULES, "the steps"),
    Table("load", "the load's", LOAD_RULES, "the slowdown"),
    Table("pooled", "the pooled steps'", POOLED_RULES, "the steps"),
    Table("peak", "the peak's", PEAK_RULES, "the peak"),
    Table("peak-verdict", "the peak verdict's", PEAK_VERDICT_RULES, "the peak"),
    Table("doubt", "the doubt's", DOUBT_RULES, "the comparison"),
    Table("settled", "the settled", SETTLED_RULES, "the rounds"),
    Table("confirm", "the confirmation's", CONFIRM_RULES, "the rounds say"),
    Table("unsettled", "the unsettled", UNSETTLED_RULES, "the doubt"),
)


def table(key: str) -> tuple[Rule[Any], ...]:
    """The rules of the table of that key in `TABLES`."""
    return next(t.rules for t in TABLES if t.key == key)


def said(key: str, rule_id: str, otherwise: str = "?") -> str:
    """What rule `rule_id` of the table of that key does (`otherwise`: no such rule)."""
    return next((r.says for r in table(key) if r.id == rule_id), otherwise)


def _num(value: object) -> str:
    if isinstance(value, int | float) and float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def rules_markdown(defaults: Mapping[str, object],
                   rules: Sequence[Rule[Any]] = RULES, says: str = "decides") -> str:
    """A markdown table of rules with the thresholds' defaults; `says`: the column head."""
    lines = [f"| # | rule | {says} | when | thresholds (default) |", "|---|---|---|---|---|"]
    for k, rule in enumerate(rules, 1):
        reads = ", ".join(f"`{t}` ({_num(defaults[t])})" for t in rule.thresholds) or "-"
        mark = " (memory)" if rule.memory else ""
        lines.append(f"| {k} | `{rule.id}`{mark} | {rule.says} | {rule.when} | {reads} |")
    return "\n".join(lines) + "\n"


def _with_table(text: str, begin: str, end: str, table: str) -> str:
    head, found, rest = text.partition(begin)
    if not found:
        return text
    _, _, tail = rest.partition(end)
    return f"{head}{begin}\n{table}{end}{tail}"


def doc_with_rules(text: str, defaults: Mapping[str, object]) -> str:
    """docs/verdicts.md's text with every table's generated list made anew between its
    marks."""
    out = text
    for t in TABLES:
        out = _with_table(out, f"<!-- {t.name} rules: made by harness.analysis.rules; do "
                          "not edit -->", f"<!-- end of {t.name} rules -->",
                          rules_markdown(defaults, t.rules, t.says))
    return out


if __name__ == "__main__":     # python -m harness.analysis.rules docs/verdicts.md
    import dataclasses
    import sys
    from pathlib import Path

    path = Path(sys.argv[1])
    made = doc_with_rules(path.read_text(), {
        f.name: getattr(AnalysisConfig(), f.name) for f in dataclasses.fields(AnalysisConfig)})
    path.write_text(made)
