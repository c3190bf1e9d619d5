"""A/A noise of interleaved confirmation rounds, by step size (issue 85 item 1).

A change between two images is confirmed in interleaved rounds (`stages.settle`): each
round runs the baseline cell and then the suspect cell afresh, shorter than the cells
(`settle.round_cell`), and reads the ratio of their statistics (`analysis.run_stat`:
the median step time net of run-queue delay, put at one CPU speed by `baseline.judged`).
Here both "images" are the same interpreter under two names, so every ratio is noise.
For each step size (pure-Python steps of about 0.3 us, 1 us, 4 us, 20 us, 100 us and
2 ms: a loop of n dict lookups, n calibrated at start, each call timed as the agent
times it, `perf_counter` either side) it runs `--rounds` A/A rounds and prints

- the spread of the per-round ratio: sd of its log, the 95th percentile and the max of
  |ratio - 1| (rounds that count only; `out`: rounds `judged` left out), and beside it
  the sd of the log ratio of `net_s` as measured, before the CPU-speed correction;
- the median statistic (us) and the calls of each round's run;
- the false-confirm rate of the rounds rule: the rounds cut into consecutive groups as
  `settle.run_rounds` would stop them (`analysis.settled`, at most twice `rounds`),
  each decided by `baseline.decide_rounds` (a slowdown suspected); a group that
  confirms either way is false. At `min_ratio` 1.1 without `step_floor_s` (the rule
  wanted) and with today's thresholds; and the least ratio R (steps of 0.005) from
  which on no group confirms, the floor off;
- the load average (1 min) when the size ended.

How a run is made is harness's own: the matrix (`runtime: local`, harness's defaults)
is loaded by `matrixfile.load`, its runtime made by `runtimes.Engines.for_matrix`, and
an `stages.orchestrator.Sweep` gives the stages' `Context`. The suspect cell is measured once
by `Sweep.run_cell` (the sweep's own measurement: its calls set the rounds' length by
`settle.round_length`); each round's runs are `settle.round_cell`'s cells run by
`settle._run` (the agent through `ctx.runner`, its statistic read by `run_stat`), the
round built as `settle.run_rounds` builds it. Rounds never wait after a busy round here
(`run_rounds` backs off 1-8 s): every round is kept, and the stop rule is replayed.

Run: PYTHONPATH=. python3 benchmarks/aa_noise.py [--sizes 0.3us,1us,4us,20us,100us,2ms]
     [--rounds 8] [--busy N] [--json OUT] [--root DIR]
     (--busy N: N busy loops, `python3 -c 'while True: pass'`, beside the whole run;
     --root DIR: the checkout whose harness runs, e.g. a worktree of an older commit;
     about 1.5 minutes quiet, 2 with --busy 2 on 2 cores; --quick: 1 us and 100 us, 2
     rounds, 0.5 s budgets: CI's smoke run, which fails on errors only)
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# --root DIR: the checkout whose harness is imported below (read before the imports;
# `main` checks that the harness imported is that checkout's).
sys.path.insert(0, sys.argv[sys.argv.index("--root") + 1] if "--root" in sys.argv[:-1]
                else str(Path(__file__).resolve().parents[1]))

import numpy as np

from harness import matrixfile
from harness.analysis import baseline, stepreading
from harness.analysis.records import Confirmation, Direction, Round
from harness.matrixfile.model import Cell
from harness.runtimes import Engines
from harness.stages import settle
from harness.stages.context import Context
from harness.stages.orchestrator import Sweep
from harness.store import RunStore
from harness.thresholds import AnalysisConfig

SCENARIO = '''
from itertools import repeat


def setup(params):
    return {"n": int(params["n"]), "d": {"key": 1}}


def step(state):
    d = state["d"]
    for _ in repeat(None, state["n"]):   # no object made per lookup: no allocator in it
        d["key"]
    return d["key"]
'''
SIZES = "0.3us,1us,4us,20us,100us,2ms"
QUICK_SIZES, QUICK_ROUNDS, QUICK_BUDGET = "1us,100us", 2, "0.5s"
UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
SUSPECTED: Direction = "slower"    # the doubt that changes a verdict (a busy host's alike)
R_STEP, R_MOST = 0.005, 3.0


def seconds(text: str) -> float:
    """"0.3us" -> 3e-07."""
    for unit in sorted(UNITS, key=len, reverse=True):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * UNITS[unit]
    return float(text)


def per_call(step: Any, state: Any, calls: int) -> float:
    """The median of `calls` calls, each timed as the agent times it (`stepper.steps`)."""
    clock = time.perf_counter
    times = []
    for _ in range(calls):
        t1 = clock()
        step(state)
        t2 = clock()
        times.append(t2 - t1)
    return statistics.median(times)


def calibrate(targets: list[float]) -> tuple[list[tuple[int, float]], float, float]:
    """Each target's loop count n and its per-call median here; the timer's own cost
    (two perf_counter calls back to back), which every per-call time carries; and a
    call with no loop (n = 0: the call, two lookups, the timer)."""
    space: dict[str, Any] = {}
    exec(compile(SCENARIO, "step.py", "exec"), space)
    step, setup = space["step"], space["setup"]
    per_call(step, setup({"n": 100}), 2000)                 # warm
    clock = time.perf_counter
    timer = statistics.median(-(clock() - clock()) for _ in range(20000))
    base = per_call(step, setup({"n": 0}), 20000)
    big = 20000
    each = (per_call(step, setup({"n": big}), 200) - base) / big
    out = []
    for target in targets:
        n = max(0, round((target - base) / each))
        calls = max(50, min(20000, int(0.1 / max(target, 1e-7))))
        out.append((n, per_call(step, setup({"n": n}), calls)))
    return out, timer, base


def matrix_text(ns: list[int], budget: str | None) -> str:
    """Images a and b, the same interpreter; one scenario `s<i>` per step size."""
    python = sys.executable
    scenarios = "".join(f"    - {{script: step.py, id: s{i}, params: {{n: {n}}}}}\n"
                        for i, n in enumerate(ns))
    return ("name: aa-noise\nruntime: local\n"
            + (f"defaults: {{budget: {budget}}}\n" if budget else "")
            + "matrix:\n  image:\n"
            f"    - {{name: a, python: {python}}}\n    - {{name: b, python: {python}}}\n"
            f"  scenario:\n{scenarios}baseline: {{image: a}}\n")


def one_round(ctx: Context, k: int, base: Cell, suspect: Cell, home: Path,
              cfg: AnalysisConfig) -> tuple[Round, float]:
    """Round `k`: the baseline run, then the suspect's, as `settle.run_rounds` runs
    and judges them; beside it the ratio of the two runs' `net_s` as measured, before
    `judged` puts them at one CPU speed (NaN where a run failed)."""
    b_med, b_busy, b_fail = settle._run(ctx, base, ctx.images.get(base),
                                         home / "rounds" / f"{k}-baseline", "baseline")
    o_med, o_busy, o_fail = settle._run(ctx, suspect, ctx.images.get(suspect),
                                         home / "rounds" / f"{k}-suspect", "suspect")
    j = baseline.judged(b_med, o_med, b_busy, o_busy, cfg, failed=b_fail or o_fail or "")
    plain = o_med.net_s / b_med.net_s if b_med and o_med and b_med.net_s > 0 else math.nan
    return Round(k, j.base_s, j.other_s, b_busy, o_busy, j.left_out, j.speed,
                 *stepreading.sm_clocks(b_med, o_med), cpu_ratio=j.cpu, rule=j.rule), plain


def groups(rounds: list[Round], most: int, cfg: AnalysisConfig) -> list[Confirmation]:
    """The rounds cut where `settle.run_rounds` would have stopped, each group
    decided; a last group the rounds ran out in before it stopped is left out."""
    out: list[Confirmation] = []
    i = 0
    while i < len(rounds):
        done: list[Round] = []
        while True:
            if baseline.settled(baseline.decide_rounds(done, SUSPECTED, cfg), cfg) or \
                    len(done) >= most or settle.usable(done) + (most - len(done)) < 2:
                if not done:
                    return out      # `rounds: 0`: no round would run
                out.append(baseline.decide_rounds(done, SUSPECTED, cfg))
                break
            if i == len(rounds):
                return out
            done.append(rounds[i])
            i += 1
    return out


def no_floor(cfg: AnalysisConfig) -> AnalysisConfig:
    """`cfg` without the step-time floor (where the floor still exists)."""
    names = {f.name for f in dataclasses.fields(cfg)}
    return dataclasses.replace(cfg, step_floor_s=0.0) if "step_floor_s" in names else cfg


def false_confirms(rounds: list[Round], most: int, cfg: AnalysisConfig) -> tuple[int, int]:
    found = groups(rounds, most, cfg)
    return sum(c.direction != "~" for c in found), len(found)


def least_quiet_ratio(rounds: list[Round], most: int, cfg: AnalysisConfig) -> float:
    """The least `min_ratio` (a grid of R_STEP) from which on no group confirms and
    some group was decided: inf where a group confirms at R_MOST, NaN where none was
    decided."""
    least = math.nan
    r = R_MOST
    while r > 1.0:
        confirmed, decided = false_confirms(rounds, most, dataclasses.replace(cfg, min_ratio=r))
        if confirmed:
            return math.inf if math.isnan(least) else least
        if decided:
            least = r
        r = round(r - R_STEP, 6)
    return least


def summary(rounds: list[Round], plain: list[float], most: int, cfg: AnalysisConfig
            ) -> dict[str, Any]:
    counted = [r for r in rounds if r.excluded is None and r.base_s > 0 and r.other_s > 0]
    net = np.log([x for r, x in zip(rounds, plain, strict=True) if r in counted])
    ratios = np.array([r.ratio for r in counted])
    logs = np.log(ratios) if ratios.size else ratios
    off = np.abs(ratios - 1)
    cpu = np.log([r.cpu_ratio for r in counted if r.cpu_ratio])
    stats = [s for r in counted for s in (r.base_s, r.other_s)]
    bare = no_floor(cfg)
    return {
        "counted": len(counted), "out": len(rounds) - len(counted),
        "median_us": statistics.median(stats) * 1e6 if stats else math.nan,
        "sd_log": float(np.std(logs, ddof=1)) if logs.size > 1 else math.nan,
        "p95": float(np.percentile(off, 95)) if off.size else math.nan,
        "max": float(off.max()) if off.size else math.nan,
        "sd_log_cpu": float(np.std(cpu, ddof=1)) if cpu.size > 1 else math.nan,
        "sd_log_net": float(np.std(net, ddof=1)) if net.size > 1 else math.nan,
        "false": false_confirms(rounds, most, bare),
        "false_today": false_confirms(rounds, most, cfg),
        "least_r": least_quiet_ratio(rounds, most, bare),
    }


def busy_loops(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run(args: argparse.Namespace, labels: list[str], ns: list[int], budget: str | None,
        work: Path, said: list[str]) -> list[dict[str, Any]]:
    """Every size's rounds, run through harness (see the module's docstring)."""
    (work / "step.py").write_text(SCENARIO)
    (work / "m.yaml").write_text(matrix_text(ns, budget))
    matrix = matrixfile.load(work / "m.yaml")
    cfg = matrix.analysis
    engines = Engines.for_matrix(matrix, matrix.runtime)
    engines.start(list(matrix.cells))
    store = RunStore.open(work / "out", matrix.name, False)
    out = []
    with engines.stopped(store.unlock):
        sw = Sweep(matrix, engines.default, store, said.append, engines.by_host)
        try:
            for i, (label, n) in enumerate(zip(labels, ns, strict=True)):
                t0 = time.monotonic()
                base, suspect = (next(c for c in matrix.cells if c.id == f"{im}.cpu.s{i}")
                                 for im in ("a", "b"))
                measured = sw.run_cell(suspect)
                res = measured.result
                if not measured.series.cols.steps.size:
                    raise SystemExit(f"{suspect.id}: the measured run timed no step "
                                     f"({res.verdict}: {res.reason})")
                calls = settle.round_length(suspect, len(measured.series.cols.steps),
                                             [res.summary.median_step_s] * 2)
                # As `run_rounds` makes them: at least `settle.ROUND_S` seconds of steps
                # and under the user's allocator (`as_user`), where the checkout swept
                # has them (an older one's: at most 1,000 calls, the quiet heap).
                more: dict[str, Any] = {}
                if "least" in inspect.signature(settle.round_cell).parameters:
                    more = {"as_user": True,
                            "least": settle.least_calls(res.summary.median_step_s)}
                short_b = settle.round_cell(base, calls, settle.MAX_CALLS, **more)
                short_s = settle.round_cell(suspect, calls, settle.MAX_CALLS, **more)
                ran = [one_round(sw.ctx, k, short_b, short_s, measured.home, cfg)
                       for k in range(1, args.rounds + 1)]
                rounds, plain = [r for r, _ in ran], [x for _, x in ran]
                most = 2 * suspect.settings.rounds
                row = {"size": label, "n": n, "measured_calls": len(measured.series.cols.steps),
                       "round_calls": short_s.settings.iterations,
                       "round_warmup": short_s.settings.warmup,
                       "most": most, **summary(rounds, plain, most, cfg),
                       "load": os.getloadavg()[0], "seconds": time.monotonic() - t0,
                       "rounds": [{**dataclasses.asdict(r), "net_ratio": x}
                                  for r, x in ran]}
                out.append(row)
                print(f"{label}: {len(rounds)} rounds of {row['round_calls']} calls in "
                      f"{row['seconds']:.0f} s", file=sys.stderr, flush=True)
        finally:
            sw.images.close()
    return out


def fmt(x: float, spec: str) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) \
        else format(x, spec)


def print_table(rows: list[dict[str, Any]], busy: int, cfg: AnalysisConfig) -> None:
    print(f"beside {busy} busy loop{'s' if busy != 1 else ''}; rounds rule: min_ratio "
          f"{cfg.min_ratio}, {cfg.round_confidence:.0%} interval, groups of 2 to twice "
          "`rounds`; false: groups confirmed / groups")
    print("sd log: of the ratio of a round that counts; dev: its |ratio - 1|; sd log net:"
          " of the ratio of net_s as measured, before `judged` puts it at one CPU speed")
    print("| step | n | calls | rounds (out) | median us | sd log | p95 dev | max dev "
          "| sd log net | false @1.1, no floor | today | none from R | load |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        k, g = r["false"]
        kt, gt = r["false_today"]
        print(f"| {r['size']} | {r['n']} | {r['round_calls']} | {r['counted'] + r['out']} "
              f"({r['out']}) | {fmt(r['median_us'], '.3g')} | {fmt(r['sd_log'], '.3f')} | "
              f"{fmt(r['p95'], '.3f')} | {fmt(r['max'], '.3f')} | "
              f"{fmt(r['sd_log_net'], '.3f')} | {k}/{g} | {kt}/{gt} | "
              f"{f'>{R_MOST}' if r['least_r'] == math.inf else fmt(r['least_r'], '.3f')}"
              f" | {r['load']:.1f} |")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--sizes", default=SIZES, help=f"step sizes (default {SIZES})")
    p.add_argument("--rounds", type=int, default=8, help="A/A rounds per size")
    p.add_argument("--busy", type=int, default=0, help="busy loops beside the whole run")
    p.add_argument("--json", default=None, help="write every round and figure here")
    p.add_argument("--root", default=str(Path(__file__).resolve().parents[1]),
                   help="the checkout whose harness runs (default: this one)")
    p.add_argument("--quick", action="store_true",
                   help="CI: 1 us and 100 us, 2 rounds, 0.5 s budgets")
    args = p.parse_args()
    root = Path(args.root).resolve()
    used = Path(sys.modules["harness"].__file__ or "").resolve().parents[1]
    if used != root:
        p.error(f"harness was imported from {used}, not --root {root} (write --root DIR, "
                "not --root=DIR)")
    if args.quick:
        args.sizes, args.rounds = QUICK_SIZES, QUICK_ROUNDS
    budget = QUICK_BUDGET if args.quick else None
    labels = args.sizes.split(",")
    signal.signal(signal.SIGTERM, _interrupt)   # the busy loops die with the run
    cal, timer, bare = calibrate([seconds(s) for s in labels])
    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, check=False).stdout.strip()
    print(f"harness of {root} ({commit or 'no git'}), {sys.executable}; timer (two "
          f"perf_counter calls) {timer * 1e9:.0f} ns, a call with no loop "
          f"{bare * 1e9:.0f} ns; calibrated per call here: "
          + ", ".join(f"{s} n={n} {c * 1e6:.3g} us" for s, (n, c) in zip(labels, cal,
                                                                          strict=True)))
    said: list[str] = []
    loops = busy_loops(args.busy)
    try:
        with tempfile.TemporaryDirectory(prefix="aa-noise-") as d:
            rows = run(args, labels, [n for n, _ in cal], budget, Path(d), said)
    finally:
        for b in loops:
            b.kill()
            b.wait()
    cfg = AnalysisConfig()
    print_table(rows, args.busy, cfg)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "root": str(root), "commit": commit, "python": sys.executable,
            "busy": args.busy, "rounds": args.rounds, "timer_s": timer, "no_loop_s": bare,
            "calibrated": [{"size": s, "n": n, "per_call_s": c}
                           for s, (n, c) in zip(labels, cal, strict=True)],
            "sizes": rows, "progress": said}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
