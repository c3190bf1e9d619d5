"""The false-alarm rate, measured: A/A sweeps of the corpus's clean releases.

Every clean release of `benchmarks/corpus/` (each control, each case's good and fixed
release, but one whose own truth still grows late in a long run, `Case.grows`, which is
said apart) is swept as a user would (`runtime: local`, `budget: 5s`, harness's defaults
otherwise) as `--copies` images of the same pins: image A, the row's baseline, and B1..Bk,
the same venv under other names. Nothing differs between them, so every bad verdict is a
false alarm: within a run (leak, slowdown, ...: each image's own verdict) or against the
baseline (regression, each B against A). Printed per verdict, with the rate's 95 % Wilson
score interval over the cells (within run) and the comparisons (vs baseline), and each
false alarm's reason.

harness's live decision claims no error rate of its own (it is not anytime-valid: it
stops on `ok` once every needed source's interval lies below 16 B/call, and on a leak only
past 256 MiB); the rate here is what a user meets.

With `--busy N`, N busy loops (`python3 -c 'while True: pass'`) run beside the whole
sweep: the rate on a busy host (issue 61: a busy host never reads as clean, nor as bad).

Run: PYTHONPATH=. python benchmarks/aa_sweeps.py [--copies 3] [--case NAME] [--batch B]
     [--jobs 2] [--busy N] [--json OUT]   (--quick: one control, two copies, a 0.5 s
     budget: CI's smoke run)
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from corpuskit.cases import Case, CaseError, load_all  # noqa: E402
from corpuskit.sweep import LENGTHS, SWEEP_TIMEOUT_S, _harness  # noqa: E402

from harness.analysis.kinds import BAD  # noqa: E402

QUICK = ("control_lru_cache",)
Z95 = 1.959963984540054


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a rate k/n (0, 1 for n = 0)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Pair:
    """One clean release swept as `copies` images of the same pins."""

    case: Case
    role: str
    release: str
    within: tuple[tuple[str, str], ...]     # (verdict, reason) of each image's own run
    versus: tuple[tuple[str, str], ...]     # (verdict, reason) of each B against A
    seconds: tuple[float, ...]              # each cell's run
    said: str = ""                          # the sweep's error, where it failed


def clean_releases(case: Case) -> list[tuple[str, str]]:
    return [(role, r) for role, r in case.releases() if not case.bad_release(role)]


def matrix(case: Case, release: str, copies: int, length: str = "budget") -> str:
    pins = case.requirements(release, tools=False)
    images = [{"name": f"{'A' if k == 0 else f'B{k}'}-{release}", "pip": pins}
              for k in range(copies)]
    scenario: dict[str, Any] = {"script": str(case.path), "id": case.slug}
    if case.params:
        scenario["params"] = case.params
    return json.dumps({"name": f"aa-{case.slug}-{release}", "runtime": "local",
                       "defaults": {**LENGTHS[length], "timeout": "10m"},
                       "matrix": {"image": images, "gpu": ["none"], "scenario": [scenario]},
                       "baseline": {"image": images[0]["name"]}}, indent=1)


def sweep_pair(case: Case, role: str, release: str, copies: int, work: Path,
               length: str = "budget") -> Pair:
    here = work / f"{case.slug}-{release}"
    here.mkdir(parents=True)
    (here / "m.yaml").write_text(matrix(case, release, copies, length))
    done = _harness(ROOT, ["sweep", str(here / "m.yaml"), "--out", str(here / "out"), "-q"],
                    here, SWEEP_TIMEOUT_S)
    runs = sorted((here / "out").glob("*/[0-9]*[0-9]"))
    if not runs or not (runs[-1] / "results.json").exists():
        return Pair(case, role, release, (), (), (), (done.stderr or done.stdout)[-600:])
    cells = json.loads((runs[-1] / "results.json").read_text()).get("cells", {}).values()
    within, versus, seconds = [], [], []
    for c in sorted(cells, key=lambda c: str(c.get("image", {}).get("label"))):
        # The cell's own verdict (its last attempt's, before any comparison) and, for
        # each B, the verdict once compared with A
        own = (c.get("attempts") or [{}])[-1]
        within.append((str(own.get("verdict", c.get("verdict"))),
                       str(own.get("reason", c.get("reason")))))
        if str(c.get("image", {}).get("label", "")).startswith("B"):
            versus.append((str(c.get("verdict")) if c.get("vs_baseline") else "not compared",
                           str(c.get("reason"))))
        seconds.append(float((c.get("timings") or {}).get("run_s") or 0.0))
    return Pair(case, role, release, tuple(within), tuple(versus), tuple(seconds))


def rate_line(name: str, verdicts: list[str]) -> str:
    bad = sum(v in BAD for v in verdicts)
    lo, hi = wilson(bad, len(verdicts))
    counts = ", ".join(f"{v} {n}" for v, n in Counter(verdicts).most_common())
    return (f"{name}: {bad}/{len(verdicts)} false alarms = {bad / max(1, len(verdicts)):.1%} "
            f"(95 % Wilson {lo:.1%}..{hi:.1%}); verdicts: {counts}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--case", action="append", default=[], help="cases whose name has NAME")
    p.add_argument("--batch", help='only the cases of CASE "batch" B ("-": of none)')
    p.add_argument("--copies", type=int, default=3, help="images of each release (>= 2)")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--json", type=Path, metavar="OUT")
    p.add_argument("--busy", type=int, default=0, metavar="N",
                   help="N busy loops beside the sweeps (a loaded host)")
    p.add_argument("--quick", action="store_true",
                   help=f"CI: {', '.join(QUICK)}, 2 copies, --length quick")
    p.add_argument("--length", choices=sorted(LENGTHS), default="budget",
                   help="each cell's length: budget (5 s), calls (max_iterations: 2000, "
                        "issue 49's matrix), default (no length key: harness's own) or "
                        "quick (0.5 s, --quick's)")
    args = p.parse_args(argv)
    if args.quick:
        args.length = "quick"
    if args.copies < 2:
        p.error("--copies must be at least 2 (A and one B)")
    try:
        cases = load_all(args.case or (list(QUICK) if args.quick else None), args.batch)
    except CaseError as exc:
        print(f"aa_sweeps: {exc}", file=sys.stderr)
        return 2
    copies = 2 if args.quick else args.copies
    todo = [(c, role, r) for c in cases for role, r in clean_releases(c)]
    if not todo:
        p.error("no clean release among the cases chosen")
    started = time.perf_counter()
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(max(0, args.busy))]
    try:
        with tempfile.TemporaryDirectory(prefix="aa-") as tmp, \
                ThreadPoolExecutor(max(1, args.jobs)) as pool:
            futures = [pool.submit(sweep_pair, c, role, r, copies, Path(tmp), args.length)
                       for c, role, r in todo]
            pairs = []
            for (c, _, r), fut in zip(todo, futures, strict=True):
                pairs.append(fut.result())
                print(f"  {c.slug} {r}: done ({time.perf_counter() - started:.0f} s)",
                      file=sys.stderr, flush=True)
    finally:
        for b in busy:
            b.kill()
            b.wait()
    # A release whose own truth grows (`Case.grows`) is no clean release: said apart
    growing = [pr for pr in pairs if pr.case.grows(pr.release)]
    pairs = [pr for pr in pairs if not pr.case.grows(pr.release)]
    within = [v for pr in pairs for v, _ in pr.within]
    versus = [v for pr in pairs for v, _ in pr.versus if v != "not compared"]
    print(f"{len(pairs)} clean releases x {copies} images of the same pins "
          f"({len(within)} cells, {len(versus)} comparisons), length {args.length} "
          f"({LENGTHS[args.length] or 'no length key'}), {args.busy} busy loops beside")
    print(rate_line("within run", within))
    print(rate_line("vs baseline", versus))
    secs = sorted(s for pr in pairs for s in pr.seconds)
    if secs:
        print(f"seconds per cell: median {secs[len(secs) // 2]:.1f}, worst {secs[-1]:.1f}")
    for pr in pairs:
        for kind, got in (("within", pr.within), ("vs A", pr.versus)):
            for v, why in got:
                if v in BAD:
                    print(f"  false alarm: {pr.case.slug} {pr.release} ({kind}): {v}: {why}")
        if pr.said:
            print(f"  {pr.case.slug} {pr.release}: the sweep failed: {pr.said}",
                  file=sys.stderr)
    for pr in growing:
        late = pr.case.truth[pr.release]["late_heap_b_per_call"]
        print(f"  not counted: {pr.case.slug} {pr.release} grows {late:+.0f} B/call late in "
              f"its truth (a leak of its own): " + "; ".join(
                  f"{v} ({why})" for v, why in pr.within))
    print(f"wall time {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({
            "copies": copies, "within": within, "versus": versus,
            "pairs": [{"case": pr.case.slug, "release": pr.release, "role": pr.role,
                       "within": pr.within, "versus": pr.versus, "seconds": pr.seconds,
                       "said": pr.said} for pr in pairs]}, indent=1))
    return 3 if any(pr.said for pr in pairs) else 0


if __name__ == "__main__":
    sys.exit(main())
