"""Load changes how long a verdict takes, never the verdict (issue 78): one fixed set of
corpus cells swept on a quiet host and beside busy loops, each load's verdicts against
the quiet ones.

The set (`CELLS`, 36 cells of `benchmarks/corpus/`, each with its truth measured by hand
in its CASE): real leaks (their bad release, and the good one beside it where the case
has one), a leak in a multiprocessing pool's workers while the caller stays flat
(`leak_pool_worker_keeps`), controls and caches whose fill runs past a quiet budget's
first second or saw-tooths for good (sympy's cacheit, mako, jinja2, SQLAlchemy, pygments,
regex, pytz, phonenumbers, ...), the corpus's slowdowns between their good and bad
release (the bad one a `regression` against the good), a 1.3-1.5x slowdown between two
lock files (`BETWEEN`: `harness sweep --between OLD NEW --scenario CASE` over
benchmarks/corpus/locks/'s requirement locks with hashes, packaging 24.1 and 24.2, 1.35x
by hand in slow_packaging_specifierset_hash's CASE; NEW a `regression` against OLD), and
A/A pairs (`AA`: one clean
release as two images of the same pins, B compared with A; 8 cells). Each case is one
`harness sweep` of the matrix benchmarks/corpus.py writes (`corpuskit.sweep`:
`runtime: local`, harness's defaults, the default budget among them; the good release as
baseline), each A/A pair benchmarks/aa_sweeps.py's matrix; one sweep at a time. Before
the first load every matrix is swept once with a 0.5 s budget, so the venvs are built
and cached before anything is timed.

Loads (`--loads`, default 0,2,6): N busy loops (`python3 -c 'while True: pass'`) beside
every sweep of the load; `--beside-suite` adds one more load, the project's unit tests
(`python3 -m pytest -q -n 6 -p no:cacheprovider tests/unit`) run over and over beside
it. Per load: the share of cells whose verdict class (good / bad / undecided:
`harness.analysis.kinds.KINDS`) is the first load's (goal >= 95 %); false alarms (a
control, a good or fixed release or an A/A cell called bad; goal 0); falsely clean (a
cell whose truth is bad called ok or plateau; goal 0); the median measured calls per
cell (live: at the decision) and the median of each cell's calls over its calls at the
first load; the median seconds per cell (`timings.cell_s`: its attempts, reruns
included); the 1-minute load average, sampled every 5 s over the load's sweeps (mean and
worst) and as `uptime` gives it at the load's end. Then the A/A pairs' false alarms per
load, within the run and against the baseline, with 95 % Wilson intervals
(`aa_sweeps.rate_line`), and every cell whose class differs from the first load's, with
the rule and reason of both. The goals are printed, never enforced (exit 0).

`--repo PATH` sweeps with the harness of another checkout (PYTHONPATH=PATH, as
`corpuskit.sweep.redecide` runs an older tree): the "before" column, from a git worktree
of an older commit; the cells, their scenarios and this benchmark stay this checkout's.
`--json OUT` writes every cell's row per load (each attempt's verdict and re-run rule),
`--keep DIR` keeps the results directories, `--case NAME` narrows the set. `--quick`
(CI): five cells (a leak's bad release, an A/A pair of a control and the two lock
files swept `--between`) at load 0, the leak alone again at load 1 (its loop at nice 19:
the loaded path is smoke-tested, CI's CPU not spent on it), a 0.5 s budget, no venv
warm-up pass: seconds once the venvs are cached.
Exit 3 when a venv cannot be built, 2 when a sweep could not run.

Run: PYTHONPATH=. python benchmarks/load_verdicts.py [--loads 0,2,6] [--beside-suite]
     [--repo PATH] [--json OUT] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from aa_sweeps import matrix as aa_matrix  # noqa: E402
from aa_sweeps import rate_line  # noqa: E402
from corpuskit.cases import CORPUS, Case, CaseError, load  # noqa: E402
from corpuskit.sweep import LENGTHS, SWEEP_TIMEOUT_S, UNAVAILABLE, _harness, sweep  # noqa: E402

from harness.analysis.kinds import BAD, KINDS  # noqa: E402

# case -> the roles swept (in the case's version order). Leaks: the bad release, and
# the good one where the case has one; slowdowns: good and bad (bad against good).
CELLS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("multidict_pop", ("good", "bad")),
    ("msgspec_tuple", ("good", "bad")),
    ("leak_propcache_cached_property", ("good", "bad")),
    ("leak_orjson_default_raises", ("good", "bad")),
    ("leak_mmh3_hash_from_buffer", ("bad",)),             # 64 B/call
    ("leak_ciso8601_fixedoffset_fromutc", ("bad",)),      # 48 B/call
    ("leak_pool_worker_keeps", ("bad",)),                 # the workers', caller flat
    ("control_lru_cache", ("good",)),
    ("control_sympy_cacheit", ("good",)),                 # fills to call ~1500
    ("control_mako_lookup_sawtooth", ("good",)),          # fills to ~1800, saw-tooth
    ("control_jinja2_template_cache", ("good",)),         # fills to ~1200, tail to 5000
    ("control_sqlalchemy_query_cache_sawtooth", ("good",)),
    ("control_pygments_lexers", ("good",)),               # fills to ~1500 in steps
    ("control_regex_cache_sawtooth", ("good",)),          # creeps to call ~4000
    ("control_pytz_zones", ("good",)),
    ("control_phonenumbers_region_metadata", ("good",)),
    ("control_cachetools_ttl_sawtooth", ("good",)),
    ("control_jmespath_cache_sawtooth", ("good",)),
    ("control_re_cache", ("good",)),
    ("control_thread_pool", ("good",)),
    ("control_page_cache", ("good",)),
    ("control_import_growth", ("good",)),
    ("slow_pydantic_excluded_parent", ("good", "bad")),
    ("lizard_analyze_source", ("good", "bad")),
    ("slow_urllib3_gzip_read_amt", ("good", "bad")),
    ("jsonschema_validate_refs", ("good", "bad")),
    ("retrying_nullhandler", ("good", "bad")),
)
# A/A pairs: (case, role of the clean release), two images of its pins
AA: tuple[tuple[str, str], ...] = (
    ("control_lru_cache", "good"), ("control_json", "good"),
    ("multidict_pop", "good"), ("slow_urllib3_gzip_read_amt", "good"))
# `harness sweep --between OLD NEW --scenario CASE` over two requirement lock files with
# hashes (benchmarks/corpus/locks/), one pin apart: (case, OLD's lock, NEW's lock), each
# file named as its image (`Case.label`), OLD the good release.
BETWEEN: tuple[tuple[str, str, str], ...] = (
    ("slow_packaging_specifierset_hash", "packaging-24.1.txt", "packaging-24.2.txt"),)
LOCKS = CORPUS / "locks"
QUICK_CELLS: tuple[tuple[str, tuple[str, ...]], ...] = (("multidict_pop", ("bad",)),)
QUICK_AA: tuple[tuple[str, str], ...] = (("control_lru_cache", "good"),)
QUICK_BETWEEN: tuple[tuple[str, str, str], ...] = BETWEEN
SUITE = "python3 -m pytest -q -n 6 -p no:cacheprovider tests/unit"
GOAL_SAME = 0.95
LOAD_EVERY_S = 5.0


@dataclass(frozen=True)
class Row:
    """One cell's result at one load."""

    load: str
    cell: str               # "case release", "aa case release A|B1"
    group: str              # leak | control | slowdown | a/a
    role: str
    bad: bool | None        # its truth (None: not scored, `Case.grows`)
    verdict: str            # "missing" where the sweep wrote no result
    cls: str                # KINDS' class, "missing" for none
    rule: str
    reason: str
    calls: int              # measured calls at the live decision, else calls run
    cell_s: float
    own: str = ""           # an A/A cell's own verdict, before any comparison
    versus: str = ""        # an A/A B cell's verdict against A ("" for none)
    attempts: str = ""      # each attempt's verdict and the re-run rule after it


@dataclass(frozen=True)
class Job:
    """One sweep: a case's releases, or an A/A pair of one clean release."""

    case: Case
    aa: str | None = None   # the A/A pair's release
    locks: tuple[Path, Path] | None = None      # `--between OLD NEW`

    @property
    def name(self) -> str:
        return (f"aa {self.case.slug} {self.aa}" if self.aa else
                f"between {self.case.slug}" if self.locks else self.case.slug)


@dataclass(frozen=True)
class Ran:
    rows: list[Row]
    rc: int
    said: str

    @property
    def ran(self) -> bool:
        """The sweep ran every cell: harness's exit 0, 1 (a finding) or 4 (undecided)."""
        return self.rc in (0, 1, 4) and all(r.verdict != "missing" for r in self.rows)


def jobs(cells: tuple[tuple[str, tuple[str, ...]], ...], pairs: tuple[tuple[str, str], ...],
         names: list[str] | None = None,
         between: tuple[tuple[str, str, str], ...] = ()) -> list[Job]:
    """The set's sweeps: each case narrowed to the roles swept, the A/A pairs, then the
    lock pairs swept `--between`; with `names`, those whose case's name contains one of
    them.

    Raises:
        CaseError: a case file is missing or its CASE malformed.
    """
    out = []
    cells = tuple((s, r) for s, r in cells if not names or any(n in s for n in names))
    pairs = tuple((s, r) for s, r in pairs if not names or any(n in s for n in names))
    for slug, roles in cells:
        case = load(CORPUS / f"{slug}.py")
        out.append(Job(replace(case, versions={r: v for r, v in case.versions.items()
                                               if r in roles})))
    for slug, role in pairs:
        case = load(CORPUS / f"{slug}.py")
        out.append(Job(case, case.versions[role]))
    for slug, old, new in between:
        if not names or any(n in slug for n in names):
            out.append(Job(load(CORPUS / f"{slug}.py"), locks=(LOCKS / old, LOCKS / new)))
    return out


def read(directory: Path | None, labels: dict[str, tuple[str, str, bool | None]],
         load_: str, group: str) -> list[Row]:
    """The rows of a results directory: `labels` maps an image label to (cell, role,
    truth); a cell without a result is "missing"."""
    got: dict[str, Any] = {}
    if directory is not None and (directory / "results.json").exists():
        got = json.loads((directory / "results.json").read_text()).get("cells", {})
    by_label = {str(c.get("image", {}).get("label")): c for c in got.values()}
    rows = []
    for label, (cell, role, bad) in labels.items():
        c = by_label.get(label)
        if c is None:
            rows.append(Row(load_, cell, group, role, bad, "missing", "missing", "", "",
                            0, 0.0))
            continue
        verdict = str(c.get("verdict"))
        tries = c.get("attempts") or [{}]
        own = tries[-1].get("verdict", verdict)
        calls = ((c.get("live") or {}).get("calls_to_decision")
                 or (c.get("end") or {}).get("iterations") or 0)
        rows.append(Row(load_, cell, group, role, bad, verdict,
                        KINDS[verdict].cls if verdict in KINDS else "missing",
                        str(c.get("rule") or ""), str(c.get("reason") or ""), int(calls),
                        float((c.get("timings") or {}).get("cell_s") or 0.0),
                        str(own) if group == "a/a" else "",
                        (verdict if c.get("vs_baseline") else "not compared")
                        if group == "a/a" and label.startswith("B") else "",
                        ", ".join(f"{a.get('verdict')}"
                                  + (f" -> {a['rerun']}" if a.get("rerun") else "")
                                  for a in tries if a)))
    return rows


def run_job(job: Job, root: Path, work: Path, length: str, load_: str) -> Ran:
    """Sweep one job with the harness of `root`; its rows."""
    case = job.case
    if job.locks is not None:
        return run_between(case, job.locks, root, work, length, load_)
    if job.aa is None:
        swept = sweep(case, root, work / case.slug, memray=False, length=length)
        labels = {case.label(r): (f"{case.slug} {r}", role,
                                  None if case.grows(r) else case.bad_release(role))
                  for role, r in case.releases()}
        rc, said = swept.rc, swept.said
        return Ran(read(swept.directory, labels, load_, case.kind), rc, said)
    here = work / f"aa-{case.slug}-{job.aa}"
    here.mkdir(parents=True, exist_ok=True)
    (here / "m.yaml").write_text(aa_matrix(case, job.aa, 2, length))
    done = _harness(root, ["sweep", str(here / "m.yaml"), "--out", str(here / "out"), "-q"],
                    here, SWEEP_TIMEOUT_S)
    runs = sorted((here / "out").glob("*/[0-9]*[0-9]"))
    labels = {f"{image}-{job.aa}": (f"aa {case.slug} {job.aa} {image}", "a/a", False)
              for image in ("A", "B1")}
    said = (done.stderr or done.stdout)[-1500:] if done.returncode not in (0, 1, 4) else ""
    return Ran(read(runs[-1] if runs else None, labels, load_, "a/a"), done.returncode, said)


def run_between(case: Case, locks: tuple[Path, Path], root: Path, work: Path, length: str,
                load_: str) -> Ran:
    """`harness sweep --between OLD NEW --scenario CASE`, as a user types it; at another
    length than harness's default, a matrix of the scenario and that length's
    `defaults:` given too (`harness sweep MATRIX --between OLD NEW`). The images are the
    lock files' stems, the case's labels."""
    here = work / f"between-{case.slug}"
    here.mkdir(parents=True, exist_ok=True)
    args = ["sweep", "--between", *map(str, locks), "--out", str(here / "out"), "-q"]
    if length == "default":
        args += ["--scenario", str(case.path)]
    else:
        (here / "m.yaml").write_text(json.dumps({
            "name": "between", "runtime": "local",
            "defaults": {**LENGTHS[length], "timeout": "10m"},
            "matrix": {"image": ["python3"], "scenario": [str(case.path)]}}))
        args.insert(1, str(here / "m.yaml"))
    done = _harness(root, args, here, SWEEP_TIMEOUT_S)
    runs = sorted((here / "out").glob("*/[0-9]*[0-9]"))
    labels = {lock.stem: (f"between {case.slug} {lock.stem}", role, case.bad_release(role))
              for lock, role in zip(locks, ("good", "bad"), strict=True)}
    said = (done.stderr or done.stdout)[-1500:] if done.returncode not in (0, 1, 4) else ""
    return Ran(read(runs[-1] if runs else None, labels, load_, case.kind),
               done.returncode, said)


@dataclass
class LoadSeen:
    samples: list[float]
    end: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def text(self) -> str:
        if not self.samples:
            return "-"
        return (f"{statistics.mean(self.samples):.1f} / {max(self.samples):.1f} "
                f"({', '.join(f'{x:.2f}' for x in self.end)})")


@contextmanager
def beside(loops: int, suite: bool, seen: LoadSeen, nice: int = 0) -> Iterator[None]:
    """`loops` busy loops (and the unit tests over and over, with `suite`) while the
    body runs; the 1-minute load average sampled meanwhile. `nice`: the loops' niceness
    (--quick: 19, so the smoke run's loop takes only what no other job wants)."""
    busy = [subprocess.Popen(["nice", "-n", str(nice), sys.executable, "-c",
                              "while True: pass"]) for _ in range(loops)]
    tests = subprocess.Popen(["bash", "-c", f"while true; do {SUITE}; done"], cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True) if suite else None
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(LOAD_EVERY_S):
            seen.samples.append(os.getloadavg()[0])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield
    finally:
        seen.end = os.getloadavg()
        stop.set()
        sampler.join()
        for b in busy:
            b.kill()
            b.wait()
        if tests is not None:
            os.killpg(tests.pid, 9)     # pytest and its workers too
            tests.wait()


@dataclass(frozen=True)
class Summary:
    load: str
    cells: int
    same: tuple[int, int] | None        # same class as the first load: (k, n)
    false_alarms: tuple[int, int]
    falsely_clean: tuple[int, int]
    calls_median: float | None
    calls_ratio: float | None           # median over cells of calls / first load's
    cell_s_median: float | None
    wall_s: float
    load_avg: str


def summarise(load_: str, rows: list[Row], first: list[Row] | None, wall: float,
              seen: LoadSeen) -> Summary:
    clean = [r for r in rows if r.bad is False]
    bugs = [r for r in rows if r.bad]
    same = ratio = None
    if first is not None:
        before = {r.cell: r for r in first}
        pairs = [(before[r.cell], r) for r in rows if r.cell in before]
        same = (sum(a.cls == b.cls for a, b in pairs), len(pairs))
        ratios = [b.calls / a.calls for a, b in pairs if a.calls and b.calls]
        ratio = statistics.median(ratios) if ratios else None
    calls = [r.calls for r in rows if r.calls]
    secs = [r.cell_s for r in rows if r.cell_s]
    return Summary(load_, len(rows), same, (sum(r.verdict in BAD for r in clean), len(clean)),
                   (sum(r.cls == "good" for r in bugs), len(bugs)),
                   statistics.median(calls) if calls else None, ratio,
                   statistics.median(secs) if secs else None, wall, seen.text())


def mark(ok: bool) -> str:
    return " ✓" if ok else " ✗"


def table(sums: list[Summary]) -> list[str]:
    out = ["| load | cells | same class as first | false alarms | falsely clean | "
           "calls/cell (x first) | s/cell | wall s | load avg 1-min mean / worst (uptime at end) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for s in sums:
        same = "-" if s.same is None else (
            f"{s.same[0]}/{s.same[1]} = {s.same[0] / max(1, s.same[1]):.1%}"
            + mark(s.same[0] >= GOAL_SAME * s.same[1]))
        calls = "-" if s.calls_median is None else f"{s.calls_median:.0f}" + (
            "" if s.calls_ratio is None else f" (x{s.calls_ratio:.2f})")
        out.append(f"| {s.load} | {s.cells} | {same} | {s.false_alarms[0]}/{s.false_alarms[1]}"
                   f"{mark(s.false_alarms[0] == 0)} | {s.falsely_clean[0]}/"
                   f"{s.falsely_clean[1]}{mark(s.falsely_clean[0] == 0)} | {calls} | "
                   f"{'-' if s.cell_s_median is None else f'{s.cell_s_median:.1f}'} | "
                   f"{s.wall_s:.0f} | {s.load_avg} |")
    return out


def flips(by_load: dict[str, list[Row]], first: str) -> list[str]:
    """Every cell whose class differs from the first load's, and every false alarm and
    falsely clean cell, with rule and reason."""
    before = {r.cell: r for r in by_load[first]}
    out = []
    for load_, rows in by_load.items():
        for r in rows:
            b = before.get(r.cell)
            wrong = ("false alarm" if r.bad is False and r.verdict in BAD else
                     "falsely clean" if r.bad and r.cls == "good" else "")
            if load_ != first and b is not None and b.cls != r.cls:
                out.append(f"  {load_}: {r.cell}: {b.verdict} [{b.rule}] -> {r.verdict} "
                           f"[{r.rule}] {wrong}: {r.reason} (attempts: {r.attempts}; at "
                           f"{first}: {b.reason}; attempts: {b.attempts})")
            elif wrong:
                out.append(f"  {load_}: {r.cell}: {wrong}: {r.verdict} [{r.rule}]: "
                           f"{r.reason}")
    return out


def harness_of(root: Path) -> str:
    rev = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "harness"],
                           capture_output=True, text=True).stdout.strip()
    return f"{rev or '?'}{' + uncommitted changes under harness/' if dirty else ''}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--loads", default="0,2,6", help="busy loops beside, per load")
    p.add_argument("--beside-suite", action="store_true",
                   help=f"one more load: `{SUITE}` over and over beside")
    p.add_argument("--repo", type=Path, metavar="PATH",
                   help="sweep with the harness of this checkout (PYTHONPATH=PATH)")
    p.add_argument("--json", type=Path, metavar="OUT", help="write every cell's row here")
    p.add_argument("--case", action="append", default=[],
                   help="only the set's cells and pairs whose case name has NAME")
    p.add_argument("--keep", type=Path, metavar="DIR",
                   help="keep the results directories under DIR (else a temporary one)")
    p.add_argument("--quick", action="store_true",
                   help="CI: 5 cells at load 0, 1 at load 1, 0.5 s budgets, no warm-up pass")
    args = p.parse_args(argv)
    root = (args.repo or ROOT).resolve()
    loads = [(f"{n} loop{'' if n == 1 else 's'}", n, False) for n in
             ([0, 1] if args.quick else [int(x) for x in args.loads.split(",")])]
    if args.beside_suite:
        loads.append(("suite", 0, True))
    length = "quick" if args.quick else "default"
    try:
        todo = jobs(*((QUICK_CELLS, QUICK_AA) if args.quick else (CELLS, AA)), args.case,
                    QUICK_BETWEEN if args.quick else BETWEEN)
    except CaseError as exc:
        print(f"load_verdicts: {exc}", file=sys.stderr)
        return 2
    if not todo:
        p.error(f"--case {args.case} names no case of the set")
    started = time.perf_counter()
    failed: list[tuple[str, Ran]] = []
    print(f"harness of {'this checkout' if args.repo is None else root} "
          f"({harness_of(root)}); {len(todo)} sweeps, one at a time; length "
          f"{length}; loads: {', '.join(n for n, _, _ in loads)}; {os.cpu_count()} CPUs",
          flush=True)
    by_load: dict[str, list[Row]] = {}
    sums: list[Summary] = []
    with tempfile.TemporaryDirectory(prefix="load-verdicts-") as scratch:
        tmp = args.keep or scratch
        if not args.quick:      # the venvs built before anything is timed
            for job in todo:
                ran = run_job(job, root, Path(tmp) / "warm", "quick", "warm")
                if not ran.ran:
                    failed.append((job.name, ran))
            print(f"venvs ready ({time.perf_counter() - started:.0f} s)", file=sys.stderr,
                  flush=True)
            todo = [j for j in todo if j.name not in {n for n, _ in failed}]
        for name, loops, suite in loads:
            seen = LoadSeen([])
            t0 = time.perf_counter()
            rows: list[Row] = []
            with beside(loops, suite, seen, nice=19 if args.quick else 0):
                # --quick: the loaded pass sweeps the first job alone (the busy loop's
                # path is what it smoke-tests; its CPU is CI's)
                for job in (todo[:1] if args.quick and sums else todo):
                    ran = run_job(job, root, Path(tmp) / name.replace(" ", "-"), length, name)
                    rows += ran.rows
                    if not ran.ran:
                        failed.append((f"{job.name} ({name})", ran))
            by_load[name] = rows
            sums.append(summarise(name, rows, by_load[loads[0][0]] if sums else None,
                                  time.perf_counter() - t0, seen))
            print(f"  {name}: done ({time.perf_counter() - started:.0f} s, load "
                  f"{seen.text()})", file=sys.stderr, flush=True)
    first = loads[0][0]
    print(f"\n{len(by_load[first])} cells; goals: same class >= {GOAL_SAME:.0%}, no false "
          "alarm, none falsely clean (printed, not enforced)\n")
    print("\n".join(table(sums)))
    print()
    for name, rows in by_load.items():
        aa = [r for r in rows if r.group == "a/a"]
        if not aa:
            continue
        print(rate_line(f"A/A within run, {name}", [r.own for r in aa]))
        print(rate_line(f"A/A vs baseline, {name}",
                        [r.versus for r in aa if r.versus not in ("", "not compared")]))
    changed = flips(by_load, first)
    print("\ncells whose class changed with load, false alarms, falsely clean:"
          if changed else "\nno cell changed class with load; no false alarm, none "
          "falsely clean")
    print("\n".join(changed))
    wall = time.perf_counter() - started
    print(f"wall time {wall:.0f} s")
    for name, ran in failed:
        print(f"load_verdicts: {name}: harness sweep exited {ran.rc}:\n{ran.said}",
              file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps({
            "harness": harness_of(root), "length": length, "wall_s": wall,
            "summary": [asdict(s) for s in sums],
            "rows": {n: [asdict(r) for r in rows] for n, rows in by_load.items()}},
            indent=1))
    if any(ran.rc == UNAVAILABLE for _, ran in failed):
        return UNAVAILABLE
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
