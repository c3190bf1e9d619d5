"""Two rounds agreeing by chance: the rounds rule replayed on recorded A/A rounds.

A change against the row's baseline is confirmed in interleaved rounds (`stages.settle`).
Here both images hold the same code: a tiny wheel (`cheap_demo`: 24 dict lookups a call,
about 1 us, as `tests/unit/test_cheap_step_change.py` builds it) installed into two venvs,
`c10` the baseline and `c21` the suspect, swept by the local runtime (`budget: 1s`,
`rounds: 3`) with every round kept: `analysis.baseline.settled` is made to say "not yet"
and the run-queue share that asks for rounds (`recheck_share`) made tiny, so each sweep
records six rounds whatever its load. Nothing differs, so any direction confirmed is
false.

The replay feeds each sweep's rounds to `baseline.decide_rounds` and `settled` as
`settle.run_rounds` does (stopping once settled, at most six), forwards, backwards and
from the third round on, with three rounds needed to confirm (`rules.CONFIRM_ROUNDS`,
today) and with two (the rule before). For a real change of x1.15 .. x2 it multiplies
every suspect time by that factor (the same noise, a known change) and counts how often
each rule confirms it, and the rounds it took.

Recorded (`--record`), kept in benchmarks/cases/aa_rounds/: `suite.jsonl` beside a
fresh-clone CI of this project (`bash .ci/run`, six test workers, load 9.3 mean on 2
cores), `loops.jsonl` beside four busy loops (`sh -c 'while :; do :; done'`, load about
5), the suspect's rounds at 3x the baseline's calls in part of it (no bias read).

Run: PYTHONPATH=. python3 benchmarks/aa_rounds.py          (replay: seconds)
     PYTHONPATH=. python3 benchmarks/aa_rounds.py --record OUT.jsonl --sweeps 40
     (--quick: the replay and one recorded sweep, `rounds: 1` at 0.3 s budgets)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import numpy as np  # noqa: E402

from harness.analysis import baseline  # noqa: E402
from harness.analysis.records import Round  # noqa: E402
from harness.thresholds import AnalysisConfig  # noqa: E402

CASES = ROOT / "benchmarks" / "cases" / "aa_rounds"
FACTORS = (1.0, 1.15, 1.25, 1.5, 2.0)
MOST = 6
CODE = '''_D = {k: k for k in range(24)}


def work():
    get = _D.get
    for k in range(24):
        get(k)
'''
SCENARIO = '''
def setup(params):
    import cheap_demo
    return cheap_demo.work


def step(work):
    work()
'''


def replay(rounds: list[Round], least: int, cfg: AnalysisConfig) -> tuple[str, int]:
    """The direction `run_rounds` would decide on these rounds, and the rounds it ran."""
    done: list[Round] = []
    for r in rounds[:MOST]:
        if done and baseline.settled(baseline.decide_rounds(done, "~", cfg, least), cfg):
            break
        done.append(r)
    return baseline.decide_rounds(done, "~", cfg, least).direction, len(done)


def rounds_of(rec: dict[str, Any], factor: float) -> list[Round]:
    return [Round(k + 1, r["base_s"], r["other_s"] * factor, r["bb"], r["ob"], r["out"],
                  cpu_ratio=r["cpu"], rule=r["rule"]) for k, r in enumerate(rec["rounds"])]


def table(name: str, recs: list[dict[str, Any]]) -> None:
    cfg = AnalysisConfig()
    recs = [r for r in recs if len(r["rounds"]) >= MOST]
    print(f"\n{name}: {len(recs)} A/A sweeps, {3 * len(recs)} sequences of rounds")
    print(f"{'rounds to confirm':>18} | " + " | ".join(
        f"{'x' + format(f, 'g'):>16}" for f in FACTORS))
    for least in (2, 3):
        cells = []
        for f in FACTORS:
            said: dict[str, int] = {"slower": 0, "faster": 0, "~": 0}
            ran = []
            for rec in recs:
                rs = rounds_of(rec, f)
                for seq in (rs, rs[::-1], rs[2:] + rs[:2]):
                    d, n = replay(seq, least, cfg)
                    said[d] += 1
                    ran.append(n)
            wrong = said["faster"] + (said["slower"] if f == 1.0 else 0)
            hit = said["slower"] if f > 1.0 else wrong
            cells.append(f"{hit:>3}/{sum(said.values()):<3} {np.mean(ran):.1f} rds")
        print(f"{least:>18} | " + " | ".join(f"{c:>16}" for c in cells))
    print("(x1: directions confirmed, all false; x1.15..x2: slowdowns confirmed; rds: mean "
          "rounds run)")


def record(out: Path, sweeps: int, budget: str, rounds: int) -> None:
    """Sweep the A/A pair `sweeps` times with every round kept; one line a sweep."""
    import os

    import sweepkit  # type: ignore[import-not-found]

    import harness.thresholds as th
    from harness.runtimes.local import LocalRuntime

    keep = th.AnalysisConfig.__init__

    def asks_rounds(self: AnalysisConfig, *a: Any, **k: Any) -> None:
        keep(self, *a, **k)
        object.__setattr__(self, "recheck_share", 1e-3)   # every pair is put to rounds

    th.AnalysisConfig.__init__ = asks_rounds  # type: ignore[method-assign]
    baseline.settled = lambda conf, cfg: False
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        wheels = root / "wheels"
        wheels.mkdir()
        for v in ("1.0", "2.1"):
            sweepkit.wheel(wheels, "cheap_demo", v, CODE)
        for tool in ("UV", "PIP"):
            os.environ[f"{tool}_NO_INDEX"] = "1"
            os.environ[f"{tool}_FIND_LINKS"] = str(wheels)
        os.environ["UV_OFFLINE"] = "1"
        for i in range(sweeps):
            d = root / f"s{i}"
            d.mkdir()
            images = [{"name": f"c{v.replace('.', '')}", "python": sys.executable,
                       "pip": [f"cheap_demo=={v}"]} for v in ("1.0", "2.1")]
            path = sweepkit.write_matrix(d, images, ["cheap.py"], name="aa", gpus=None,
                                         defaults={"budget": budget, "rounds": rounds},
                                         files={"cheap.py": SCENARIO})
            t0 = time.monotonic()
            run = sweepkit.sweep_matrix(path, LocalRuntime(root / "cache"), out=d / "out")
            res = {r.image.label: r for r in run.results.values()}["c21"]
            vs = res.vs_baseline
            conf = vs.confirmation if vs is not None else None
            took = round(time.monotonic() - t0, 1)
            rec: dict[str, Any] = {
                "sweep": i, "verdict": str(res.verdict), "s": took,
                "rounds": [{"base_s": r.base_s, "other_s": r.other_s, "bb": r.base_busy,
                            "ob": r.other_busy, "out": r.excluded, "cpu": r.cpu_ratio,
                            "rule": r.rule} for r in (conf.rounds if conf else [])]}
            with out.open("a", encoding="utf-8") as f:
                f.write(json.dumps(rec) + "\n")
            ratios = ", ".join(f"{r.ratio:.2f}" for r in (conf.rounds if conf else []))
            print(f"sweep {i + 1}/{sweeps}: {len(rec['rounds'])} rounds ({ratios}) in "
                  f"{rec['s']} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--record", type=Path, help="sweep the A/A pair, rounds to this file")
    ap.add_argument("--sweeps", type=int, default=40)
    ap.add_argument("--quick", action="store_true",
                    help="the replay and one recorded sweep (`rounds: 1`)")
    args = ap.parse_args()
    for path in sorted(CASES.glob("*.jsonl")):
        table(path.stem, [json.loads(x) for x in path.read_text().splitlines() if x])
    if args.quick:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "one.jsonl"
            record(out, 1, "0.3s", 1)
            got = json.loads(out.read_text())
            # how many rounds a busy host lets run is load's; that they were recorded is not
            assert got["rounds"] and all(r["base_s"] > 0 and r["other_s"] > 0
                                         for r in got["rounds"]), got
    elif args.record:
        record(args.record, args.sweeps, "1s", 3)


if __name__ == "__main__":
    main()
