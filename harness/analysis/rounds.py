"""Confirm a between-cell change on interleaved rounds, never on pooled steps alone.

A row's cells run one after another while the host's load drifts, and thousands of
autocorrelated step times pooled into one Mann-Whitney test make a 10 % drift look
certain (p = 1e-50). So a suspected regression (or improvement) is run again: baseline
and suspect alternate, B S B S ..., and each pair of runs is one round whose statistic
is the ratio of the two runs' median step times. The change is confirmed when

- at least two rounds are usable (rounds whose agent measured the stepping thread's
  run-queue delay, or cgroup throttling, at `busy_share` of its step time or more ran
  on a busy host and are left out, with the reason, unless CPU time per step, which
  holds no waiting, puts the round on the same side of `min_ratio` as the wall clock
  net of the delay does: `judged`; so are rounds whose two runs ran
  at CPU speeds more than `speed_spread` apart where the change rests on putting
  them at one speed, which holds for CPU-bound work only: `speed_reason`);
- every usable round agrees in direction; and
- the `round_confidence` interval of the mean log ratio (Student t over rounds, so the
  between-run variance counts) lies wholly beyond `min_ratio` (or below 1/min_ratio),
  and the medians differ by at least `step_floor_s`.

asv's `--interleave-processes` plus a two-sample test on per-process results is the
same idea; the per-round agreement and the busy-round exclusion are what is added.

Rounds stop as soon as the question is settled (`settled`): once two usable rounds
give an interval that clears the threshold (confirmed, or reversed), or lies wholly on
the no-change side of the threshold asked about (below min_ratio for a suspected or
hidden slowdown), or the rounds disagree in direction. Looking after every round makes
the interval's nominal level optimistic; what keeps a false confirmation rare is that
every round must agree as well.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from harness.analysis.contention import RunStat, speed_scaled
from harness.analysis.runrules import LEFT_OUT, RoundEvidence, round_rule
from harness.analysis.vsbaseline import Confirmation, Direction, Round
from harness.thresholds import AnalysisConfig


def busy_reason(base_busy: float | None, other_busy: float | None,
                cfg: AnalysisConfig) -> str | None:
    """Why a round ran on a busy host, or None when neither run did: either run waited
    for a CPU `busy_share` of its step time or more."""
    for name, share in (("baseline", base_busy), ("suspect", other_busy)):
        if share is not None and share >= cfg.busy_share:
            return f"host busy: run-queue delay {share:.0%} of the {name} run's step time"
    return None


def _side(ratio: float, cfg: AnalysisConfig) -> int:
    """Which side of the no-change band a ratio lies on: 1 slower, -1 faster, 0 within."""
    return 1 if ratio > cfg.min_ratio else -1 if ratio < 1 / cfg.min_ratio else 0


def speed_reason(plain: float, scaled: float, speed: float | None,
                 cfg: AnalysisConfig) -> str | None:
    """Why a round whose two runs ran at CPU speeds (the agent's canary; `speed` is the
    suspect's over the baseline's) more than `speed_spread` apart is left out: its
    ratio as measured (`plain`) and at one CPU speed (`scaled`) fall on different
    sides of `min_ratio`, so the change would rest on the correction, which holds for
    CPU-bound work only (a memory-bound step does not speed up with the canary). None:
    the speeds were close, or both ratios say the same (a change far larger than the
    speeds' difference stands either way)."""
    if speed is None or 1 / cfg.speed_spread <= speed <= cfg.speed_spread:
        return None
    if not (plain > 0 and scaled > 0) or _side(plain, cfg) == _side(scaled, cfg):
        return None
    return (f"host busy: the suspect run's CPU ran at {speed:.2f}x the baseline run's "
            f"speed (the canary loop), and the change rests on that: {plain:.2f}x as "
            f"measured, {scaled:.2f}x at one speed")


def at_one_speed(base: RunStat, other: RunStat, cfg: AnalysisConfig
                 ) -> tuple[float, float, float | None, str | None]:
    """A round's two runs at one CPU speed (`contention.speed_scaled`): both step times,
    the suspect's speed over the baseline's, and why the speeds leave the round out
    (`speed_reason`), as a sweep's rounds and a saved run's both read them."""
    b_s, o_s, speed = speed_scaled(base, other)
    plain = other.net_s / base.net_s if base.net_s > 0 else math.nan
    scaled = o_s / b_s if b_s > 0 else math.nan
    return b_s, o_s, speed, speed_reason(plain, scaled, speed, cfg)


def cpu_ratio(base: RunStat, other: RunStat) -> float | None:
    """The suspect's CPU time per step over the baseline's: in canary loops (one CPU
    speed) where both runs timed the canary, else in seconds; None where either run
    did not record CPU time. A run-queue delay is time off the CPU, so it is not in it."""
    for b, o in ((base.work, other.work), (base.cpu_s, other.cpu_s)):
        if math.isfinite(b) and math.isfinite(o) and b > 0 and o > 0:
            return o / b
    return None


class Judged(NamedTuple):
    """A round as it counts (`judged`)."""

    base_s: float               # the baseline run's step time, at one CPU speed
    other_s: float              # the suspect run's
    speed: float | None         # the suspect's CPU speed over the baseline's
    cpu: float | None           # the CPU-time ratio (`cpu_ratio`)
    left_out: str | None        # why the round does not count; None: it counts
    note: str                   # a busy round that counts: why it does
    rule: str = ""              # the rule of `runrules.ROUND_RULES` that decided


def judged(base: RunStat | None, other: RunStat | None, base_busy: float | None,
           other_busy: float | None, cfg: AnalysisConfig, failed: str = "") -> Judged:
    """A round as it counts: both step times at one CPU speed (`at_one_speed`), the
    suspect's CPU speed over the baseline's, the CPU-time ratio (`cpu_ratio`), and
    whether it counts: the first rule of the table's `runrules.ROUND_RULES` that fires
    on what the round showed (a failed run; CPU speeds apart; a busy host, where CPU
    time per step agreeing with the wall clock still counts it: load adds waiting,
    which neither holds, and a change seen by both is the step's own; leaving every
    busy round out turned a 15x slowdown seen in each of them into no answer)."""
    b_s, o_s, speed, apart, cpu, agrees = 0.0, 0.0, None, None, None, False
    if base is not None and other is not None and not failed:
        b_s, o_s, speed, apart = at_one_speed(base, other, cfg)
        cpu = cpu_ratio(base, other)
        wall = o_s / b_s if b_s > 0 and o_s > 0 else math.nan
        agrees = cpu is not None and math.isfinite(wall) and _side(cpu, cfg) == _side(
            wall, cfg) and (_side(wall, cfg) == 0 or min(
                max(cpu, 1 / cpu), max(wall, 1 / wall)) >= cfg.busy_min_ratio)
    else:
        failed = failed or "a run measured no step"
    busy = busy_reason(base_busy, other_busy, cfg) if not failed else None
    rule, _ = round_rule(RoundEvidence(failed, apart or "", busy or "", agrees))
    why = {"round-failed": failed, "round-speeds": apart, "round-busy": busy}.get(rule.id)
    note = (f"host busy, counted: CPU time per step {cpu:.2f}x agrees"
            if rule.id == "round-busy-agrees" and cpu is not None else "")
    assert (rule.says == LEFT_OUT) == bool(why), rule.id
    return Judged(b_s, o_s, speed, cpu, why or None, note, rule.id)


def settled(conf: Confirmation, cfg: AnalysisConfig) -> bool:
    """Whether more rounds could change the answer (a sequential rule, looked at after
    every round once two are usable).

    The rounds answer one question: is the suspect slower than the baseline by
    `min_ratio` or more (faster, where the pooled test suspected faster; slower, where a
    busy host called for them: only a slowdown changes a verdict). Settled when

    - the interval clears the threshold either way (a direction is decided);
    - usable rounds disagree in direction (every round must agree to confirm); or
    - the interval lies wholly on the no-change side of the question's threshold
      (below `min_ratio` for a slowdown, above 1/`min_ratio` for an improvement).
    """
    usable = [r.ratio for r in conf.rounds if r.excluded is None and r.base_s > 0
              and r.other_s > 0]
    if len(usable) < 2:
        return False
    if conf.direction != "~":
        return True
    if any(x > 1 for x in usable) and any(x < 1 for x in usable):
        return True
    if conf.suspected == "faster":
        return conf.lo > 1 / cfg.min_ratio
    return conf.hi < cfg.min_ratio


def _span(indices: list[int]) -> str:
    return ", ".join(str(i) for i in indices)


def decide_rounds(rounds: list[Round], suspected: Direction,
                  cfg: AnalysisConfig) -> Confirmation:
    """Decide a suspected change from interleaved rounds.

    Args:
        rounds: The rounds run, in order; `excluded` ones are reported, not used.
        suspected: "slower" or "faster", the pooled comparison's finding.
        cfg: Supplies `min_ratio`, `round_confidence` and `step_floor_s`.

    Returns:
        The confirmed direction ("~" unless every usable round agrees and the interval
        clears the threshold), the interval and the rounds that decided it.
    """
    usable = [r for r in rounds if r.excluded is None and r.base_s > 0 and r.other_s > 0]
    left_out = [r for r in rounds if r not in usable]
    note = ""
    if left_out:
        note = "; left out: " + "; ".join(
            f"round {r.index} ({r.excluded or 'no step times'})" for r in left_out)
    ids = [r.index for r in usable]
    if len(usable) < 2:
        return Confirmation(suspected, "~", math.nan, math.nan, math.nan, ids,
                            f"not confirmed: {len(usable)} usable round(s) of {len(rounds)}, "
                            f"2 needed{note}", list(rounds))
    logs = np.log([r.ratio for r in usable])
    mean = float(logs.mean())
    sem = float(logs.std(ddof=1)) / math.sqrt(len(logs))
    # lazy: SciPy only when rounds run: not at the top, so a sweep that never confirms never
    # loads it (tests/unit/test_startup.py); and its special functions alone, not
    # scipy.stats (~0.9 s more to import), whose t.ppf is this same stdtrit.
    from scipy import special

    t = float(special.stdtrit(len(logs) - 1, 0.5 + cfg.round_confidence / 2))
    lo, hi = math.exp(mean - t * sem), math.exp(mean + t * sem)
    ratio = math.exp(mean)
    diff = abs(float(np.median([r.other_s - r.base_s for r in usable])))
    ratios = ", ".join(f"{r.ratio:.2f}" for r in usable)
    head = (f"rounds {_span(ids)}: ratios {ratios}, mean {ratio:.2f}x "
            f"({cfg.round_confidence:.0%} CI {lo:.2f}..{hi:.2f})")
    direction: Direction = "~"
    if diff >= cfg.step_floor_s:
        if all(r.ratio > 1 for r in usable) and lo > cfg.min_ratio:
            direction = "slower"
        elif all(r.ratio < 1 for r in usable) and hi < 1 / cfg.min_ratio:
            direction = "faster"
    verb: str
    if suspected == "~":     # rounds run because a cell ran on a busy host
        verb = "no change" if direction == "~" else direction
    elif direction == suspected:
        verb = "confirmed"
    elif direction == "~":
        verb = "not confirmed"
    else:
        verb = f"reversed ({direction})"
    return Confirmation(suspected, direction, ratio, lo, hi, ids,
                        f"{verb}: {head}{note}", list(rounds))
