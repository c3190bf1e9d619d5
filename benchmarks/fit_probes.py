"""Probes per row of `harness fit`: the planner against simulated memory boundaries.

Each simulated row has a memory model, peak = fixed + per_unit * value (+ sampling
noise), and a limit; a value fits when its true peak stays under the limit. The true
per-unit memory differs from what the samples show by a model error (the samples miss
a transient, or the framework's allocator rounds up), so the planner's prediction is
right, a little off, or far off. The fake cell runner answers fit/oom and hands the
planner the same memory lines `harness fit` fits (`fit`). Printed: max and
mean probes per row against the bound ceil(log2(range)) + 3, per range and model error,
and with no limit known (no prediction: doubling and bisection only).

    PYTHONPATH=. python3 benchmarks/fit_probes.py [--rows 400] [--quick]
    (--quick: 20 rows per case: CI's smoke run; the bound is checked either way)
"""

from __future__ import annotations

import argparse
import random
import statistics

from harness.fit import FIT, fit_sources, plan_fit, probe_bound

MiB = 1 << 20


def simulate(lo: int, hi: int, fixed: float, per_unit: float, limit: float,
             model_error: float, noise: float, rng: random.Random,
             know_limit: bool = True) -> tuple[int, int, int]:
    """(probes, boundary found, true boundary) for one row."""
    true_unit = per_unit * (1 + model_error)       # what really counts against the limit

    def fits(v: int) -> bool:
        return fixed + true_unit * v <= limit

    truth = max((v for v in range(lo, hi + 1) if fits(v)), default=lo - 1)
    seen: dict[int, str] = {}
    peaks: dict[int, dict[str, float]] = {}
    runs = 0
    while True:
        predicted = None
        if know_limit:
            line = fit_sources(peaks).get("rss")
            if line is not None:
                predicted = line.limit_value(limit)
        step = plan_fit(lo, hi, seen, runs, predicted)
        if step.action != "probe":
            return runs, step.fits, truth
        assert step.value is not None
        runs += 1
        v = step.value
        if fits(v):
            seen[v] = FIT
            peaks[v] = {"rss": fixed + per_unit * v + rng.gauss(0, noise)}
        else:
            seen[v] = "oom"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--rows", type=int, default=400)
    ap.add_argument("--quick", action="store_true", help="20 rows per case (seconds)")
    args = ap.parse_args(argv)
    rows = 20 if args.quick else args.rows
    rng = random.Random(24)
    print(f"{'range':<10} {'model error':<12} {'rows':>5} {'max':>4} {'mean':>6} {'bound':>5}"
          "  wrong")
    worst_over = 0
    for lo, hi in ((1, 16), (1, 64), (1, 256), (1, 1024), (8, 200)):
        bound = probe_bound(lo, hi)
        for label, errors, know in (("0", (0.0,), True), ("+-5%", (-0.05, 0.05), True),
                                    ("+-30%", (-0.3, 0.3), True),
                                    ("x0.3..x3", (-0.7, 2.0), True),
                                    ("no limit", (0.0,), False)):
            counts: list[int] = []
            wrong = 0
            for _ in range(rows):
                fixed = rng.uniform(100, 2000) * MiB
                limit = fixed + rng.uniform(0.5, 1.2) * (hi - lo + 1) * 64 * MiB
                # boundaries over the whole range, some beyond it, some below lo
                per_unit = (limit - fixed) / rng.uniform(lo - 0.9, hi * 1.1)
                err = rng.uniform(*errors) if len(errors) == 2 else errors[0]
                probes, found, truth = simulate(lo, hi, fixed, per_unit, limit, err,
                                                noise=0.01 * per_unit, rng=rng,
                                                know_limit=know)
                counts.append(probes)
                wrong += found != truth
            worst_over = max(worst_over, max(counts) - bound)
            print(f"{lo}..{hi:<7} {label:<12} {len(counts):>5} {max(counts):>4} "
                  f"{statistics.mean(counts):>6.2f} {bound:>5}  {wrong}")
    print("every row within the bound" if worst_over <= 0 else
          f"OVER THE BOUND by {worst_over}")
    return 0 if worst_over <= 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
