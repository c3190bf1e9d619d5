"""Leaks that start late, and the live look that stops a run early (issue 61 point 2).

A live `ok` stops a run once its memory so far is flat; growth that starts after that
point is never seen. These cases (written here, not upstream reports) grow from a
moment into the run: each step sleeps 3 ms (about 1,600 calls in the default 5 s
budget) and, from `onset_s` seconds after setup (the warm-up's 200 calls take ~0.65 s of
them), keeps `rate` bytes a call, until `stop_s` where given (a cache that fills, then
holds). Truth is measured by hand first (`--truth`: the step in a plain loop for
`calls` calls under tracemalloc, the growth per call over the last third and the
first), not by harness.

For each case it prints:

- harness's verdict from `harness sweep` (the user's way: `runtime: local`, the default
  budget), the call its live look decided at and the cell's seconds;
- the full run: the agent run for the whole budget with no live look, decided by the
  same table (`analysis.decision.within_run`), and the live look replayed on that run's
  samples (`live_full.compared`: the run as the look would have stopped it, decided
  the same way): whether the two agree, the call the look decided at, and the seconds
  it would have saved. `--record DIR` keeps the full runs' samples (the ones
  benchmarks/live_full.py replays are tests/data/live-full/late-onset/). `--onsets`:
  full runs only, of leaks of 0.5-8 KiB a call starting at 40-90 % of the budget, each
  with the live look replayed (where the look may stop, and what it then misses).

Run: PYTHONPATH=. python benchmarks/late_onset.py [--budget 5] [--case NAME] [--truth]
     [--record DIR] [--onsets] [--quick]   (CI: two cases, a 1.5 s budget,
     each step sleeping 1 ms)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from live_full import Compared, compared, read_run, sanitized, table  # noqa: E402

from harness.matrixfile.model import BUDGET_MIN_CALLS  # noqa: E402

SCENARIO = '''
import time

KEEP = []


def setup(params):
    return {"t0": time.monotonic(), "onset": params["onset_s"], "rate": params["rate"],
            "stop": params.get("stop_s"), "sleep": params.get("sleep_s", 0.003)}


def step(state):
    time.sleep(state["sleep"])
    now = time.monotonic() - state["t0"]
    if state["rate"] and now >= state["onset"] and (
            state["stop"] is None or now < state["stop"]):
        KEEP.append(bytearray(state["rate"]))
'''

# name: (params, what it is); times in seconds after setup. WARM: the 200 warm-up calls
# of 3 ms; "frac" a share of the budget after them (a 5 s budget's values are shown).
WARM = 0.65
CASES: dict[str, tuple[dict[str, object], str]] = {
    "late_leak_30pct": ({"onset_frac": 0.3, "rate": 1024}, "leak"),        # 2.15 s
    "late_leak_60pct": ({"onset_frac": 0.6, "rate": 2048}, "leak"),        # 3.65 s
    "leak_from_1_5s": ({"onset_s": 1.5, "rate": 2048}, "leak"),
    "flat": ({"onset_s": 0.0, "rate": 0}, "control"),
    "late_cache": ({"onset_frac": 0.3, "rate": 1024, "stop_frac": 0.4}, "control"),
    "early_cache": ({"onset_s": 0.0, "rate": 1024, "stop_s": 1.0}, "control"),
}
QUICK = ("late_leak_30pct", "flat")
QUICK_SLEEP, QUICK_WARM = 0.001, 0.25    # --quick: each step sleeps 1 ms, not 3
QUICK_BUDGET = 1.5      # --quick: seconds (the leak still starts at 30 % of it)
# `--onsets`: leaks of these bytes a call, from these shares of the budget (full runs)
RATES = (512, 1024, 2048, 8192)
ONSETS = (0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9)


def params_for(name: str, budget: float, quick: bool = False) -> dict[str, object]:
    """A case's scenario params at this budget (shares of it turned into seconds);
    `quick`: steps of QUICK_SLEEP, the warm-up QUICK_WARM."""
    out = dict(CASES[name][0])
    for key in ("onset", "stop"):
        frac = out.pop(f"{key}_frac", None)
        if isinstance(frac, float):
            out[f"{key}_s"] = round((QUICK_WARM if quick else WARM) + frac * budget, 3)
    return {**out, "sleep_s": QUICK_SLEEP} if quick else out


def truth(params: dict[str, object], seconds: float) -> str:
    """Growth per call by hand: the step in a plain loop for `seconds`, tracemalloc
    read every 50 calls; the rate over the first and the last third of the calls."""
    code = SCENARIO + f'''
import tracemalloc, json
tracemalloc.start()
state = setup({params!r})
seen = []
end = time.monotonic() + {seconds}
n = 0
while time.monotonic() < end:
    step(state)
    n += 1
    if n % 50 == 0:
        seen.append((n, tracemalloc.get_traced_memory()[0]))
third = len(seen) // 3
rate = lambda a, b: (b[1] - a[1]) / (b[0] - a[0])
print(json.dumps([n, rate(seen[0], seen[third]), rate(seen[-third], seen[-1])]))
'''
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    n, first, last = json.loads(out)
    return f"{n} calls: first third {first:+.0f} B/call, last third {last:+.0f} B/call"


def swept(tmp: Path, budget: float, names: list[str], quick: bool = False
          ) -> dict[str, dict[str, object]]:
    """Each case's cell as `harness sweep` decides it."""
    (tmp / "late.py").write_text(SCENARIO)
    scen = "\n".join(f"    - {{script: late.py, id: {n}, params: "
                     f"{json.dumps(params_for(n, budget, quick))}}}" for n in names)
    (tmp / "m.yaml").write_text(
        f"name: late\nruntime: local\ndefaults: {{budget: {budget:g}s}}\nmatrix:\n"
        f"  image:\n    - {{name: py, python: {sys.executable}}}\n  scenario:\n{scen}\n")
    subprocess.run([sys.executable, "-m", "harness", "sweep", str(tmp / "m.yaml"), "--out",
                    str(tmp / "r"), "-q"], cwd=tmp,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(
                       [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])},
                   capture_output=True, check=False)
    [results] = list((tmp / "r" / "late").glob("*/results.json"))
    cells = json.loads(results.read_text())["cells"]
    return {n: cells[f"py.cpu.{n}"] for n in names}


def full_run(tmp: Path, budget: float, name: str, params: dict[str, object],
             record: Path | None = None) -> Compared:
    """The agent for the whole budget (no live look), decided by the table, and the live
    look replayed on it (`live_full.compared`); with `record`, its samples are kept
    there as `<name>.jsonl`."""
    (tmp / "late.py").write_text(SCENARIO)
    out = tmp / f"{name}.jsonl"
    out.unlink(missing_ok=True)
    subprocess.run([sys.executable, str(ROOT / "harness" / "agent" / "agent.py"),
                    "--scenario", str(tmp / "late.py"), "--params",
                    json.dumps(params), "--iterations", "1000000",
                    "--warmup", "200",
                    "--out", str(out), "--quiet", "--no-gpu", "--budget", f"{budget:g}",
                    "--budget-min", str(BUDGET_MIN_CALLS), "--max-overhead", "0.05"],
                   cwd=tmp, env={**os.environ, "PYTHONMALLOC": "malloc",
                                 "GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"},
                   check=True, capture_output=True)
    if record is not None:
        record.mkdir(parents=True, exist_ok=True)
        (record / out.name).write_text(sanitized(out.read_text(), "late.py"))
    return compared(name, read_run(out))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=float, default=5.0)
    p.add_argument("--case", action="append", default=[])
    p.add_argument("--truth", action="store_true", help="measure each case by hand first")
    p.add_argument("--quick", action="store_true", help="CI: two cases, a 1.5 s budget, 1 ms steps")
    p.add_argument("--onsets", action="store_true",
                   help="full runs only: leaks of each of RATES a call from each of ONSETS")
    p.add_argument("--record", type=Path, metavar="DIR",
                   help="keep each full run's samples in DIR (benchmarks/live_full.py "
                   "replays tests/data/live-full/late-onset/)")
    args = p.parse_args()
    names = list(QUICK) if args.quick else (args.case or list(CASES))
    budget = QUICK_BUDGET if args.quick else args.budget
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if args.onsets:
            print(table([full_run(tmp, budget, f"rate{r}_from{round(100 * f)}pct",
                                  {"onset_s": round(WARM + f * budget, 3), "rate": r},
                                  args.record)
                         for r in RATES for f in ONSETS]))
            return 0
        if args.truth:
            for n in names:
                print(f"truth {n}: {truth(params_for(n, budget, args.quick), budget + 0.7)}",
                      flush=True)
        t = time.monotonic()
        cells = swept(tmp, budget, names, args.quick)
        print(f"harness sweep, budget {budget:g} s ({time.monotonic() - t:.1f} s):")
        print(f"{'case':18} {'kind':8} {'verdict':10} {'live at':>8} {'cell s':>7}  "
              f"{'full run':9} {'live look':9} {'agree':5} {'at call':>7} {'saved s':>7}")
        agree = 0
        saved: list[float] = []
        for n in names:
            c = cells[n]
            live = c.get("live") or {}
            at = live.get("calls_to_decision", "-") if isinstance(live, dict) else "-"
            secs = float((c.get("outcome") or {}).get("duration_s") or 0.0)
            run = full_run(tmp, budget, n, params_for(n, budget, args.quick), args.record)
            agree += run.agree
            saved.append(run.saved_s)
            print(f"{n:18} {CASES[n][1]:8} {c['verdict']:10} {at!s:>8} {secs:7.1f}  "
                  f"{run.full:9} {run.live or '-':9} {'yes' if run.agree else 'NO':5} "
                  f"{run.calls or '-':>7} {run.saved_s:7.1f}", flush=True)
        print(f"live and full agree: {agree}/{len(names)}; seconds the live look saves, "
              f"median {sorted(saved)[len(saved) // 2]:.1f}, total {sum(saved):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
