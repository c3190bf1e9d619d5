"""The next probe of `harness fit`: doubling, a memory-predicted jump, or bisection (pure).

A row's answer is the largest value of an integer param in [lo, hi] whose cell runs:
`lo - 1` when even `lo` does not, `hi` when the whole range does. Fitting is taken to be
monotonic (a value that fits means every smaller one does; one that fails means every
larger one fails), so every observation narrows the candidates to `fits .. fails - 1`,
where `fits` is the largest value seen fitting and `fails` the smallest failing above it.

Plain bisection of those candidates needs ceil(log2(fails - fits)) probes. The planner
spends a probe on a guess (the next doubling, or the value the memory model predicts)
only when, whichever way the guess turns out, bisecting what is left still ends within
`probe_bound`: the bound holds however wrong a prediction is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from harness.analysis.kinds import CUT_SHORT, NOT_MEASURED

# What a probe says about its value: fits, or the way it failed (each failure, a kind
# whose run was cut short, means "does not fit"; they are kept apart so a crash is never
# reported as running out of memory), or that the row cannot go on (a kind that measured
# nothing: image unavailable, GPU not applicable).
FIT = "fit"
FAILURES = CUT_SHORT
STOPS = NOT_MEASURED

Action = Literal["probe", "done", "stop"]


def probe_bound(lo: int, hi: int) -> int:
    """Most probes (runs) a row may cost: ceil(log2(hi - lo + 1)) + 3."""
    if hi < lo:
        raise ValueError(f"empty range {lo}..{hi}")
    return math.ceil(math.log2(hi - lo + 1)) + 3


def bisect_cost(candidates: int) -> int:
    """Probes plain bisection needs to pick one answer out of `candidates`."""
    return math.ceil(math.log2(candidates)) if candidates > 1 else 0


@dataclass(frozen=True)
class FitStep:
    """What to do next, and what is known so far.

    `fits` is the largest value seen fitting (lo - 1: none yet), `fails` the smallest
    value seen failing above it (hi + 1: none yet); on `done` the answer is `fits`.
    `how` says why `value` was chosen: "doubling", "predicted", "bisection".
    """

    action: Action
    value: int | None
    fits: int
    fails: int
    how: str = ""
    why: str = ""
    conflicts: tuple[int, ...] = field(default=())  # failed below a value that fit


def known(lo: int, hi: int, seen: Mapping[int, str]) -> tuple[int, int, tuple[int, ...]]:
    """(fits, fails, conflicts) from the observations, as `FitStep` defines them."""
    fits = max((v for v, o in seen.items() if o == FIT), default=lo - 1)
    fails = min((v for v, o in seen.items() if o in FAILURES and v > fits), default=hi + 1)
    conflicts = tuple(sorted(v for v, o in seen.items() if o in FAILURES and v < fits))
    return fits, fails, conflicts


def plan_fit(lo: int, hi: int, seen: Mapping[int, str], runs: int,
             predicted: float | None = None) -> FitStep:
    """The next value to probe, or the answer.

    Args:
        lo: Smallest value of the range.
        hi: Largest value of the range.
        seen: Outcome per value probed (or found on disk): "fit", one of `FAILURES`, or
            one of `STOPS`.
        runs: Probes run so far (cells taken from disk do not count).
        predicted: The value the memory model predicts as the largest that fits (from
            two or more fitting probes and a known memory limit), or None.

    Raises:
        ValueError: an empty range, a value outside it, or an unknown outcome.
    """
    if hi < lo:
        raise ValueError(f"empty range {lo}..{hi}")
    for v, o in seen.items():
        if not lo <= v <= hi:
            raise ValueError(f"value {v} is out of range {lo}..{hi}")
        if o != FIT and o not in FAILURES and o not in STOPS:
            raise ValueError(f"unknown outcome {o!r} at {v}")
    fits, fails, conflicts = known(lo, hi, seen)
    stopped = sorted(v for v, o in seen.items() if o in STOPS)
    if stopped:
        return FitStep("stop", stopped[0], fits, fails, why=f"{seen[stopped[0]]} at "
                       f"{stopped[0]}: this row cannot be probed", conflicts=conflicts)
    if fails == fits + 1:
        return FitStep("done", None, fits, fails, conflicts=conflicts)
    budget = probe_bound(lo, hi)
    candidates = fails - fits

    def worst(v: int) -> int:
        return max(v - fits, fails - v)

    def affordable(v: int) -> bool:
        return runs + 1 + bisect_cost(worst(v)) <= budget

    middle = fits + (candidates + 1) // 2
    guesses: list[tuple[str, int]] = []
    if predicted is not None and math.isfinite(predicted):
        # The boundary is floor(predicted) when the prediction is right: probe it and
        # the value above it, the one that leaves fewer candidates first (above it,
        # while nothing failed yet: that failure closes the range).
        near = {min(max(v, fits + 1), fails - 1) for v in (math.floor(predicted),
                                                              math.floor(predicted) + 1)}
        def order(v: int) -> tuple[int, int]:
            return worst(v), -v

        guesses += [("predicted", v) for v in sorted(near, key=order)]
    if fails == hi + 1:
        # Nothing failed yet: double the distance from lo (lo, lo+1, lo+3, ...).
        guesses.append(("doubling", min(2 * fits - lo + 1 if fits >= lo else lo, hi)))
    for how, v in guesses:
        if v != middle and affordable(v):
            return FitStep("probe", v, fits, fails, how, conflicts=conflicts)
    return FitStep("probe", middle, fits, fails, "bisection", conflicts=conflicts)
