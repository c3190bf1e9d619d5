"""The corpus of real regressions: every case of `benchmarks/corpus/` through harness,
psleak and pytest-memray, against the truth measured by hand.

A case is a harness scenario written from an upstream report's reproducer, with a
module-level `CASE` dict: title, kind ("leak" | "slowdown" | "control"), link, package,
versions ({"good", "bad", "fixed"}, any None; the bad one the first bad release),
extra requirements, params, truth per release (measured outside harness by
`benchmarks/corpuskit/truth.py`: heap B/call, or µs/call) and how it was measured. A
slowdown's truth is a fact of the CPU it was taken on, so a slowdown case's releases are
timed again here by the same loop (`timed_here`), and a release slow here as the bad one
is bad here (`bug_here`); the table shows both figures.

For each case the runner writes the matrix a user would (`runtime: local`, one image
per release `{name, pip: [...]}`, live mode `max_iterations: 2000`, the rest harness's
defaults, the good release as baseline, or the fixed one where none is good) and runs
`harness sweep`; harness builds one venv per release (cached), which also holds psleak
and, for leaks and controls, pytest-memray, so the three tools run the same bytes.
Then, per release:

- harness: the cell's verdict, the measured calls at the live decision, the cell's run
  seconds; per case whether the row's first bad is the case's first bad release;
- psleak (`times=2`, and its defaults) through benchmarks/vs_psleak.py's driver;
- pytest-memray: `@pytest.mark.limit_leaks("16 KB")` over 1000 calls after 200
  warm-up (leaks and controls only).

Totals per tool: recall (bugs found in their first bad release: a leak called leak, a
slowdown called slower), false alarms (controls, good and fixed releases called bad; a
release whose own truth grows late in a long run, `Case.grows`, is shown but not
scored), exact first bad, calls to decide (median, worst), wall time.

`--old REV`: the same results re-decided by REV's rules (`harness report DIR
--reanalyze --write` run from a git worktree of REV), side by side; a fresh sweep by REV
only where it cannot re-decide. `--quick` (CI): two cases (a leak, a control), the
bad (or control) release only, psleak `times=2` only (venvs without pytest-memray),
`--length quick` (a 0.5 s budget).
Exit 3 when a venv cannot be built.

Run: PYTHONPATH=. python benchmarks/corpus.py [--case NAME] [--old REV] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from corpuskit import drivers  # noqa: E402
from corpuskit.cases import Case, CaseError, load_all  # noqa: E402
from corpuskit.sweep import (  # noqa: E402
    ALSO_SLOWER,
    LENGTHS,
    MAX_ITERATIONS,
    UNAVAILABLE,
    Swept,
    drop_worktree,
    redecide,
    sweep,
    worktree,
)
from vs_psleak import psleak_on  # noqa: E402

from harness.analysis.kinds import BAD, KINDS, TIMED  # noqa: E402

QUICK = ("multidict_pop", "control_lru_cache")   # a leak's bad release, a control
TOOLS = ("harness", "psleak times=2", "psleak defaults", "memray limit_leaks")


@dataclass
class Row:
    case: str
    kind: str
    release: str
    role: str
    bug: bool                       # the truth: this release has the case's bug
    truth: str
    got: dict[str, tuple[str, int, float]] = field(default_factory=dict)  # tool -> v, calls, s
    old: tuple[str, int, float] | None = None
    grows: bool = False             # not the bug, but its own truth grows (`Case.grows`)


def found(kind: str, verdict: str) -> bool:
    """The tool named the case's bug: a leak as a memory finding, a slowdown as slower
    (its verdict, or a slowdown found beside a memory verdict: `ALSO_SLOWER`)."""
    if kind == "slowdown":
        return verdict in TIMED or verdict.endswith(ALSO_SLOWER)
    verdict = verdict.removesuffix(ALSO_SLOWER)
    return verdict in BAD and KINDS[verdict].figure == "memory" if verdict in KINDS \
        else verdict == "leak"      # psleak's and pytest-memray's word


def alarm(verdict: str) -> bool:
    verdict = verdict.removesuffix(ALSO_SLOWER)
    return verdict in BAD or verdict == "leak"


def truth_text(case: Case, release: str) -> str:
    t = case.truth.get(release, {})
    if "b_per_call" in t:
        half = t.get("b_per_call_2nd_half")
        steps = half is not None and abs(t["b_per_call"] - half) > max(16.0, 0.2 * half)
        return f"{t['b_per_call']:.0f} B/call" + (f" (2nd half {half:.0f})" if steps else "")
    if "us_per_call_first" in t:
        return f"{t['us_per_call_first']:.0f}->{t['us_per_call_last']:.0f} µs/call"
    if "us_per_call" in t:
        return f"{t['us_per_call']:.1f} µs/call"
    return "?"


HERE_CALLS, HERE_WARMUP, HERE_CAP_S = 100, 3, 5.0


def timed_here(case: Case, swept: Swept, work: Path) -> dict[str, float]:
    """A slowdown case's µs/call per release, measured on this machine by the truth
    loop (`drivers.truth`, in the venv harness ran): {} for other cases, or where a
    release's venv or loop failed.

    Speed is a fact of a CPU: opencv 4.13.0.90's cv2.compare is back at 4.11's time on
    the CPU its truth was taken on (245 against 237 µs/call), and 27x slower than 4.11
    on an AMD EPYC (5,398 against 199). Each release's truth is the one measured beside
    the verdict."""
    if case.kind != "slowdown" or not all("us_per_call" in case.truth.get(r, {})
                                          for _, r in case.releases()):
        return {}
    got: dict[str, float] = {}
    for _, release in case.releases():
        cell = swept.cells.get(release)
        if cell is None or cell.venv is None:
            return {}
        try:
            t = drivers.truth(Path(cell.venv) / "bin" / "python", case.path, case.params,
                              work, HERE_CALLS, HERE_WARMUP, HERE_CAP_S)
        except RuntimeError:
            return {}
        got[release] = float(t["us_per_call"])
    return got


def bug_here(case: Case, role: str, release: str, here: dict[str, float]) -> bool:
    """The truth of one release on this machine: a release other than the good and the
    bad one is bad where its time is nearer (by ratio) the bad release's than the good
    one's, as measured here; where the bad release is not slower here than the good
    one the case does not reproduce on this CPU, and the recorded truth stands."""
    good, bad = case.versions.get("good"), case.versions.get("bad")
    if (role in ("good", "bad") or release not in here or good not in here
            or bad not in here or here[bad] <= here[good]):
        return case.bad_release(role)
    return abs(math.log(here[release] / here[bad])) < abs(math.log(here[release] / here[good]))


def other_tools(case: Case, swept: Swept, release: str, work: Path, quick: bool
                ) -> dict[str, tuple[str, int, float]]:
    cell = swept.cells.get(release)
    if cell is None or cell.venv is None:
        return {}
    python = Path(cell.venv) / "bin" / "python"
    got: dict[str, tuple[str, int, float]] = {}
    runs = [("psleak times=2", 2)] + ([] if quick else [("psleak defaults", None)])
    for name, times in runs:
        try:
            got[name] = psleak_on(python, case.path, case.params, work, times)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, ValueError):
            got[name] = ("error", 0, 0.0)
    if case.kind != "slowdown" and not quick:
        try:
            got["memray limit_leaks"] = drivers.memray(python, case.path, case.params, work)
        except subprocess.TimeoutExpired:
            got["memray limit_leaks"] = ("timeout", 0, 0.0)
    return got


@dataclass(frozen=True)
class Options:
    quick: bool = False
    length: str = "budget"          # corpuskit.sweep.LENGTHS
    others: bool = True             # psleak and pytest-memray beside harness
    old_fresh: bool = False         # the old tree sweeps afresh instead of re-deciding


def run_case(case: Case, work: Path, opts: Options, old_root: Path | None
             ) -> tuple[Swept, list[Row], str, Swept | None]:
    cwork = work / case.slug
    quick = opts.quick
    swept = sweep(case, ROOT, cwork, memray=not quick, length=opts.length)
    old, how = (redecide(swept, old_root, cwork, memray=not quick, fresh=opts.old_fresh)
                if old_root is not None else (None, ""))
    here = timed_here(case, swept, cwork) if not quick else {}
    rows = []
    for role, release in case.releases():
        cell = swept.cells.get(release)
        bug = bug_here(case, role, release, here)
        text = truth_text(case, release)
        if release in here:
            text += f" (here {here[release]:,.0f}" + (
                "" if bug == case.bad_release(role) else
                ": as slow as the bad release here" if bug else
                ": as fast as the good release here") + ")"
        grows = not bug and case.grows(release)
        if grows:
            text += (f"; grows {case.truth[release]['late_heap_b_per_call']:+.0f} B/call late "
                     "in a long run (a leak of its own: not counted)")
        row = Row(case.slug, case.kind, release, role, bug, text, grows=grows)
        if cell is not None:
            row.got["harness"] = (cell.verdict, cell.calls, cell.seconds)
            if opts.others:
                row.got.update(other_tools(case, swept, release, cwork, quick))
        if old is not None and release in old.cells:
            o = old.cells[release]
            row.old = (o.verdict, o.calls, o.seconds)
        rows.append(row)
    return swept, rows, how, old


def cell_text(got: tuple[str, int, float] | None, right: bool | None) -> str:
    if got is None:
        return "-"
    mark = "" if right is None else (" ✓" if right else " ✗")
    return f"{got[0]}{mark} ({got[1]}, {got[2]:.1f} s)"


def right(row: Row, verdict: str) -> bool | None:
    """Whether the verdict holds to the release's truth; None where that truth is a
    leak other than the case's (`Row.grows`): not scored."""
    if row.grows:
        return None
    return found(row.kind, verdict) if row.bug else not alarm(verdict)


def table(rows: list[Row], firsts: dict[str, bool | None], old: str | None) -> list[str]:
    cols = ["case", "release", "truth", *TOOLS] + ([f"harness @ {old}"] if old else [])
    out = ["| " + " | ".join(cols) + " |", "|---" * len(cols) + "|"]
    for r in rows:
        first = firsts.get(r.case)
        role = r.role + (" (first bad named)" if r.bug and first else
                         " (first bad missed)" if r.bug and first is False else "")
        cells = [cell_text(r.got.get(t), right(r, r.got[t][0]) if t in r.got else None)
                 for t in TOOLS]
        if old:
            cells.append(cell_text(r.old, right(r, r.old[0]) if r.old else None))
        out.append(f"| {r.case} | {r.release} {role} | {r.truth} | " + " | ".join(cells)
                   + " |")
    return out


def totals(rows: list[Row], pick: str) -> dict[str, object]:
    """One tool's recall, false alarms and calls to decide over the rows it ran."""
    got: list[tuple[Row, tuple[str, int, float]]] = []
    for r in rows:
        g = r.old if pick == "old" else r.got.get(pick)
        if g is not None:
            got.append((r, g))
    bugs = [(r, g) for r, g in got if r.bug and (pick.startswith("harness") or pick == "old"
                                                 or r.kind != "slowdown")]
    clean = [(r, g) for r, g in got if not r.bug and not r.grows]
    calls = [g[1] for _, g in got if g[1]]
    # Seconds a cell took to its verdict, per verdict (issue 49: seconds, not calls)
    by_verdict: dict[str, list[float]] = {}
    for _, g in got:
        by_verdict.setdefault(g[0], []).append(float(g[2]))
    return {"recall": f"{sum(found(r.kind, g[0]) for r, g in bugs)}/{len(bugs)}",
            "false_alarms": f"{sum(alarm(g[0]) for _, g in clean)}/{len(clean)}",
            "calls_median": statistics.median(calls) if calls else None,
            "calls_worst": max(calls) if calls else None,
            "seconds": round(sum(float(g[2]) for _, g in got), 1),
            "seconds_by_verdict": {v: (round(statistics.median(t), 1), round(max(t), 1))
                                   for v, t in sorted(by_verdict.items())}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--case", action="append", default=[],
                   help="only cases whose file name contains NAME (repeatable)")
    p.add_argument("--old", metavar="REV", help="re-decide with REV's rules beside")
    p.add_argument("--json", metavar="OUT", type=Path, help="write every row here")
    p.add_argument("--jobs", type=int, default=1, help="cases run side by side")
    p.add_argument("--quick", action="store_true",
                   help=f"CI: {', '.join(QUICK)}, bad/control release, psleak times=2")
    p.add_argument("--batch", metavar="B",
                   help='only the cases of CASE "batch" B (e.g. 49, the held-out cases '
                        'of issue 49; "-": the cases of no batch)')
    p.add_argument("--length", choices=sorted(LENGTHS), default="budget",
                   help="each cell's length: budget (5 s, the default), calls "
                        f"(max_iterations: {MAX_ITERATIONS}, as the runner wrote it before) "
                        "or quick (1 s, --quick's)")
    p.add_argument("--harness-only", action="store_true",
                   help="leave psleak and pytest-memray out")
    p.add_argument("--old-fresh", action="store_true",
                   help="--old REV sweeps afresh (its own length and live stop) instead "
                        "of re-deciding these samples")
    args = p.parse_args(argv)
    try:
        cases = load_all(args.case or (list(QUICK) if args.quick else None), args.batch)
    except CaseError as exc:
        print(f"corpus: {exc}", file=sys.stderr)
        return 2
    if not cases:
        p.error(f"--case {args.case} names no case under benchmarks/corpus/")
    if args.quick:      # the release with the bug (a control's one release) only
        args.length = "quick"
        cases = [replace(c, versions={r: v for r, v in c.versions.items()
                                      if r == ("good" if c.kind == "control" else "bad")})
                 for c in cases]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="corpus-") as tmp:
        work = Path(tmp)
        old_root = worktree(args.old, ROOT, work / "old-tree") if args.old else None
        try:
            with ThreadPoolExecutor(max(1, args.jobs)) as pool:
                opts = Options(args.quick, args.length, not args.harness_only,
                               args.old_fresh)
                futures = [pool.submit(run_case, c, work, opts, old_root) for c in cases]
                results = []
                for c, fut in zip(cases, futures, strict=True):
                    results.append(fut.result())
                    print(f"  {c.slug}: done ({time.perf_counter() - started:.0f} s)",
                          file=sys.stderr, flush=True)
        finally:
            if old_root is not None:
                drop_worktree(ROOT, old_root)
    # A release whose venv cannot be built is its case's cell ("-"), said at the end
    # with exit 3; every other case is still measured and shown.
    broken = [s for s, _, _, _ in results if s.rc == UNAVAILABLE or s.directory is None]
    rows = [r for _, rs, _, _ in results for r in rs]
    firsts = {s.case.slug: (s.first_bad == s.case.versions.get("bad")
                            if s.case.kind != "control" else None) for s, _, _, _ in results}
    old_exact = [o.first_bad == o.case.versions.get("bad") for _, _, _, o in results
                 if o is not None and o.case.kind != "control"]
    hows = sorted({h for _, _, h, _ in results if h})
    print(f"{len(cases)} cases, {len(rows)} releases. Cells: verdict ✓/✗ against the truth "
          "(calls to decide, seconds). harness: live mode, measured calls at the decision, "
          "the cell's run; psleak and pytest-memray: calls made, wall time.\n")
    print("\n".join(table(rows, firsts, args.old)))
    print()
    summary = {t: totals(rows, t) for t in TOOLS}
    if args.old:
        summary[f"harness @ {args.old} ({', '.join(hows)})"] = totals(rows, "old")
    exact = [v for v in firsts.values() if v is not None]
    for tool, t in summary.items():
        secs = ", ".join(f"{v} {m} s ({w} s)" for v, (m, w) in
                         dict(t["seconds_by_verdict"]).items())     # type: ignore[call-overload]
        print(f"{tool}: recall {t['recall']}, false alarms {t['false_alarms']}, calls to "
              f"decide median {t['calls_median']} worst {t['calls_worst']}, "
              f"{t['seconds']} s in cells; seconds per cell by verdict, median (worst): "
              f"{secs}")
    print(f"harness exact first bad: {sum(exact)}/{len(exact)}"
          + (f"; @ {args.old}: {sum(old_exact)}/{len(old_exact)}" if args.old else ""))
    wall = time.perf_counter() - started
    print(f"wall time {wall:.0f} s")
    for b in broken:
        print(f"corpus: {b.case.slug}: harness sweep exited {b.rc}:\n{b.said}",
              file=sys.stderr)
    if broken:
        print("  fix: pip and a package index must be reachable, and every release of "
              "a case must exist for this Python", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps({"rows": [asdict(r) for r in rows], "totals": summary,
                                         "exact_first_bad": [sum(exact), len(exact)],
                                         "wall_s": wall}, indent=1))
    return UNAVAILABLE if broken else 0


if __name__ == "__main__":
    sys.exit(main())
