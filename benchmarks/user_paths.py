"""The model of users' paths (tests/model/userpaths.py), walked longer than CI walks it.

Random sequences of what users do (sweep, --resume, Ctrl-C, edits of a pin, the
scenario, its helper module and `iterations`, report, --reanalyze with and without
--set, explain, cut result.json or samples.jsonl, copy a directory) over FakeRuntime,
every answer held to the model's truth after every step. Prints the sequences, steps
and commands walked, and the seconds per step side by side with one plain sweep of the
same matrix timed in the same run (the ratio says what a step costs in sweeps).

Run: python benchmarks/user_paths.py [--sequences 200] [--steps 30] [--random]
     [--quick] (--quick: 4 sequences of 8 steps, CI's smoke run)
Exit 1 when the model finds a defect (the failing sequence is printed).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "model")]

from hypothesis import HealthCheck, Phase, settings  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402
from userpaths import UserPaths  # noqa: E402


def one_sweep() -> float:
    """Seconds of one sweep of the model's matrix as it starts (8 cells)."""
    machine = UserPaths()
    try:
        started = time.perf_counter()
        machine.sweep(None)
        return time.perf_counter() - started
    finally:
        machine.teardown()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sequences", type=int, default=200)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--random", action="store_true",
                    help="new sequences each run (default: the same ones, derandomized)")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.sequences, args.steps = 4, 8
    sweep_s = min(one_sweep() for _ in range(2))   # the first pays the imports
    UserPaths.counts.clear()
    UserPaths.counts.update(sequences=0, steps=0, commands=0)
    started = time.perf_counter()
    found = None
    try:
        run_state_machine_as_test(UserPaths, settings=settings(
            max_examples=args.sequences, stateful_step_count=args.steps, deadline=None,
            derandomize=not args.random, database=None,
            suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
            phases=[Phase.explicit, Phase.generate]))
    except AssertionError as exc:   # the model's failing sequence, printed below
        found = exc
    spent = time.perf_counter() - started
    c = UserPaths.counts
    per_step = spent / max(c["steps"], 1)
    print(f"sequences {c['sequences']}, steps {c['steps']}, commands {c['commands']}, "
          f"{spent:.1f} s")
    print("paths taken: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())
                                       if k not in ("sequences", "steps", "commands")))
    print(f"per step {per_step:.3f} s; one plain sweep {sweep_s:.3f} s; "
          f"a step costs {per_step / sweep_s:.2f} sweeps")
    if found is not None:
        print(f"DEFECT FOUND:\n{str(found)[-6000:]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
