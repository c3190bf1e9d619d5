"""The verdict: one ordered table of named rules over one `Evidence` per cell.
Every verdict of every kind is the first rule of `RULES` that fires; its id and the
`Facts` it read are kept in the result, so `harness report DIR --why CELL` prints every
rule in order on the stored evidence (`why`). Three callers ask the one table: the
live decider (memory rules only), the post-run verdict (`decision.decide`) and the row
comparison. docs/verdicts.md's list is `ruledocs.rules_markdown()`. The words of a
verdict are made after the table has decided (`decision`), never beside it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from harness.analysis.facts import Facts
from harness.analysis.table import Rule, first_of
from harness.analysis.trendrules import steady_above_trend
from harness.analysis.trends import MemoryTrend
from harness.thresholds import AnalysisConfig

# Memory that may carry a leak, and the trend sources each needs leaking: RSS only
# with USS agreeing (file-backed pages and page cache move RSS, not USS); the USS of the
# agent's worker processes (`kids`: a pool's, a DataLoader's) alone.
CARRIERS: dict[str, tuple[str, ...]] = {
    "heap": ("heap",), "uss+rss": ("uss", "rss"), "gpu": ("gpu",), "fw": ("fw",),
    "kids": ("kids",)}
# The sources read first, in order, when nothing leaks: the cell's memory in words.
PRIMARY = ("heap", "uss", "rss")
WORKERS = "kids"


def shown(source: str) -> str:
    """A memory source as its words name it: the worker processes' USS (`kids`, the
    series' key) as "workers"."""
    return "workers" if source == WORKERS else source

# The share of the USS's growth per call the heap's must be to be named the carrier:
# most of it (a heap of half the USS's growth leaves half outside it, named for the USS).
HEAP_HOLDS = 0.75
PLATEAUS = ("heap", "uss", "rss", "gpu", "fw", "kids")
# Sources read by the total floor alone, never the per-call rule: page cache, file-backed
# and lazily touched pages move RSS (and the cgroup) by pages, with no leak behind them.
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
    """The carriers whose every source leaks, each with its first source's trend, the
    largest growth per call first (the carrier); ties keep the order of `CARRIERS`. The
    Python heap lies inside the USS: where it holds at least `HEAP_HOLDS` of the USS's
    growth it is named first, the narrower carrier (tracemalloc names its line), not
    the USS that adds its own tracing and allocator pages (CI, busy: "uss grows +1.2"
    over a heap's +1.1 KiB/call, the heap's leak said second)."""
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
    """The carrier whose leak a filling cache could still explain, largest rate first.
    USS with RSS counts where one of the two could be a fill and the other leaks or
    could be one."""
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
    """The sources an `ok` rests on: the primary (the first of heap, USS, RSS read) and
    the worker processes' USS where the scenario started any. A pool's leak lives in
    its workers alone: an `ok` that did not read them flat enough times says nothing of
    them (issue 78: 8 readings on a busy host, dropped, and the cell read `ok`)."""
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
    """The log shows the image cannot use the GPU, and the run showed nothing that
    stands whatever the device: it crashed, or nothing leaked, slowed or levelled off."""
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


# The rule that leaves a cell undecided because its host was busy while it ran (read by
# the re-run rules, `sweeping.measure`, and the sweep's last line, `sweeping.course`).
BUSY_HOST = "busy-host"
# The rule that leaves a cell undecided because a wall-clock deadline ended its run while
# the host took most of its time (read by the re-run rules and the sweep's last line).
TIMEOUT_BUSY = "timeout-busy"
# The rule that leaves growth a cache still filling could explain undecided (read by
# `sweeping.measure`: a short run's next makes `short_calls` calls at least).
FILLING = "filling"
# The rule that leaves a leak its budget cut short of `short_calls` undecided (read by
# `sweeping.measure`: at its `overrun` bound it stays undecided, never a leak).
SHORT = "short"
# The rule that asks a first attempt's slowdown to last through a run twice as long (read
# by `sweeping.measure` where the `overrun` bound leaves no room for that run).
RISING = "rising"
# The rule that leaves a cell undecided because its confirmation rounds left the doubt
# open (read by the sweep's last line, `sweeping.course`: more rounds or a quieter host).
UNSETTLED = "unsettled"
# The rule that leaves a slowdown no second run of the cell read undecided (read by
# `compare.join`: such a cell is not compared).
ONE_RUN = "one-run"
# The undecided rules about step time alone, which a busy host can raise on a cell whose
# memory is clean (read by `answers.search.free_of`: such a cell has shown a leak absent).
TIME_UNDECIDED = (UNSETTLED, ONE_RUN, BUSY_HOST, RISING)
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
    Rule("suspected", "suspected", "pooled step times slower than the baseline's, with no "
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
# Ids results recorded before the one table kept, and the rule each is now.
FORMER_IDS = {"ended": "crash", "vs-baseline-regression": "regression",
              "vs-baseline-suspected": "suspected"}


def first_rule(ev: Evidence, rules: tuple[Rule[Evidence], ...] = RULES
               ) -> tuple[Rule[Evidence], str]:
    """The first rule of `rules` (the verdict's table, in order) that fires, and what it
    names."""
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
    """Every rule in order, with whether it fired (the first that fired decided), each
    source's figures and the other facts first."""
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
