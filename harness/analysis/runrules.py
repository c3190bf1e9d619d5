"""The table's rules about a run's course, beside the verdict's (`rules.RULES`): when a
live look stops a run (`LIVE_RULES`, over a `LiveEvidence` of the samples so far),
whether a confirmation round counts (`ROUND_RULES`, over a `RoundEvidence`) and whether
an undecided cell runs again, and how (`RERUN_RULES`, over a `RerunEvidence`). Each is a
`rules.Rule` (id, what it does, when, thresholds, test), the first that fires decides,
docs/verdicts.md lists them with the verdict's (`ruledocs.rules_markdown`), and the
decision records the id that fired (`LiveDecision.rule`, `Round.rule`), so `--why`
names it. The figures the tests compare are read in `sequential.decided` and
`rounds.judged`; the thresholds are compared here."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.analysis.rules import FILLING
from harness.analysis.table import Rule, first_of
from harness.thresholds import AnalysisConfig

if TYPE_CHECKING:
    from harness.analysis.trends import StepTrend

# What a live look does.
STOP_LEAK, STOP_OK, RUN_ON = "stop: leak", "stop: ok", "run on"
# What a round does.
COUNTS, LEFT_OUT = "counts", "left out"


@dataclass(frozen=True)
class LiveEvidence:
    """What a live look read of the samples so far (`sequential.decided`).

    Attributes:
        leak: The memory rules read a leak: its carrier ("" none).
        grown: What that carrier grew (bytes).
        large: `leak_large_bytes`.
        flat: The memory rules read `ok`, every needed source read enough: the first
            of them ("" not so).
        upper: The highest upper bound of the needed sources' slope intervals, over the
            run so far and over its late third (bytes/call).
        floor: `ok_floor_bytes`.
        measured: The share of its run measured (`sequential.LiveDecider.share`: of its
            time budget and the least calls a slow step's run goes on to, or of its cap;
            1 without a budget).
        ok_share: `live_ok_share`.
        rose: Whether the step times so far rose (`stepreading.rose`), read only where
            the rule that asks it is reached (it reads every step).
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
        """The first needed source, where every one's slope intervals lie under the
        floor ("" not so)."""
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
    """What a confirmation round's two runs showed (`rounds.judged`).

    Attributes:
        cfg: The thresholds.
        failed: Why a run of the round failed or measured no step ("" none).
        plain: The suspect's step time over the baseline's as measured (net of the
            run-queue delay).
        scaled: The same at one CPU speed.
        speed: The suspect run's CPU speed over the baseline run's (the canary loop;
            None: not timed).
        busy: Each run's share of its step time spent waiting for a CPU, by name
            ("baseline", "suspect"; None: not recorded).
        cpu: The suspect's CPU time per step over the baseline's (None: not recorded).
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
    speeds were within `speed_spread`, or the ratio as measured and at one CPU speed lie
    on the same side of `min_ratio` (a change far larger than the speeds' difference
    stands either way)."""
    c, speed = ev.cfg, ev.speed
    if speed is None or 1 / c.speed_spread <= speed <= c.speed_spread:
        return None
    if not (ev.plain > 0 and ev.scaled > 0) or side(ev.plain, c) == side(ev.scaled, c):
        return None
    return (f"host busy: the suspect run's CPU ran at {speed:.2f}x the baseline run's "
            f"speed (the canary loop), and the change rests on that: {ev.plain:.2f}x as "
            f"measured, {ev.scaled:.2f}x at one speed")


def busy_run(ev: RoundEvidence) -> str | None:
    """Why the round ran on a busy host (rule `round-busy`), or None: either run waited
    for a CPU `busy_share` of its step time or more."""
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
        cfg: The thresholds.
        again: The cell may run again (its repeats are not spent, and no
            `--iterations` bounds its runs).
        capped: Its cap ended it with most of its budget left (`facts.capped_at`, in
            words; "" not so).
        grown: What the largest leaking carrier grew (`memory.risen`; None: none leaks).
        ended: Its budget ended it (`facts.budget_ended`, in words; "" not so).
        done: The calls it made.
        asked: Its cap on calls.
        room: The calls a run again may make within the cell's `overrun` bound (the
            plugin's, `harness.check`'s; None: no bound, a sweep's cell).
    """

    cfg: AnalysisConfig
    again: bool = False
    capped: str = ""
    grown: float | None = None
    ended: str = ""
    done: int = 0
    asked: int = 0
    room: int | None = None


# A budgeted run under an `overrun` bound that ended undecided between a leak and a cache
# of more entries than it made calls runs again this many times its calls
# (`growth.FILL_RERUN`, as a filling reading does).
LENGTH_FILL = 4


def fill_asks(ev: LengthEvidence) -> int:
    """The calls rule `length-fill` asks of a run again: LENGTH_FILL times those made,
    `short_calls` at least, its cap at most, and no more than keep the growth at this
    rate under `leak_large_bytes` (a live look stops a run there: growth that matters
    whatever it is, and past it the safety stop; a leak of 1.1 KiB a call that grew
    ~150 MiB in a marked test's 0.5 s ended a run 4 times as long at the safety stop)."""
    asks = min(max(LENGTH_FILL * ev.done, ev.cfg.short_calls), ev.asked)
    if ev.grown is not None and ev.grown > 0 and ev.done > 0:
        asks = min(asks, int(ev.done * ev.cfg.leak_large_bytes / ev.grown))
    return asks


def fill_fits(ev: LengthEvidence) -> bool:
    """Whether rule `length-fill`'s run again is worth its time and fits: it makes twice
    the calls made at least (`fill_asks`), within the room its `overrun` bound leaves."""
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
    """What decides whether an undecided cell runs again, and how
    (`sweeping.measure.run_attempts`).

    Attributes:
        undecided: Its verdict is one a longer run may settle (`kinds.RUN_LONGER`).
        spent: Its repeats are spent.
        script: A whole script ran once (the agent's script mode).
        asked: Its length was asked on the command line (`--iterations`): the most
            calls any run of it makes.
        busy: A busy host alone left it undecided (its verdict's rule `busy-host`).
        crowded: A wall-clock deadline ended it while the host took most of its time
            (its verdict's rule `timeout-busy`).
        budgeted: It runs for a time budget.
        short: Its budget ended it after too few calls (rule `short`).
        capped: Its cap, not its budget, ended it (rule `capped`).
        seconds: What the next attempt of a kind would take at this run's pace.
        timeout: The cell's timeout (s).
        left: What is left of the cell's `overrun` bound (s): its budget times
            `overrun`, less what its attempts took (inf: no bound).
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
    timeout: float = float("inf")
    left: float = float("inf")

    @property
    def planned(self) -> str:
        """The next attempt the rules below would run: its cap raised ("cap"), or
        `kind`."""
        return "cap" if self.budgeted and self.capped else self.kind

    @property
    def kind(self) -> str:
        """The next attempt its facts call for: until more calls (cut short), a longer
        budget, or more calls (a run of fixed length)."""
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
         "together): decided as if its repeats were spent; still undecided, its budget was "
         "too short for a verdict, said in its reason with the budget that would decide; "
         "decided, its reason says it was not run again (a first attempt's slowdown: "
         "unconfirmed, rule `rising`'s run twice as long left out)", (),
         lambda ev: ev.planned if math.isfinite(ev.left) and ev.seconds(ev.planned) > ev.left
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


def reach_s(steps: StepTrend | None, ran: int, measured_s: float, calls: int) -> float:
    """The seconds a fresh run takes to make `calls` calls at the pace of one that made
    `ran` in `measured_s`, its steps' rise from early to late carried on (a step time
    that grows with the calls made: the time grows with their square)."""
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
    """The calls a budgeted run again of growth a filling cache could explain (rule
    `filling`) makes at least where its run made fewer than `short_calls`: those that
    rule `short` would ask next, asked now (one run again, not two; its cap at most);
    0 for any other."""
    return min(cfg.short_calls, cap) if rule == FILLING and ran < cfg.short_calls else 0
