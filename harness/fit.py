"""`harness fit`: per row, the largest value of an integer param in [lo, hi] whose cell
runs, and the memory per unit of it, probed in the fit's own directory; fit.md, fit.json
and fit.html written from one model (`FitReport`), so every renderer says the same
(`cli.fit` parses and prints). Fitting is taken as monotonic; a guess (doubling, or where
the memory line meets the limit) is probed only if bisection still ends within
`probe_bound`, so a wrong one cannot cost more.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from harness import matrixfile
from harness.analysis.kinds import BAD, CUT_SHORT, NOT_MEASURED, OOM
from harness.analysis.outcomes import allocation_report
from harness.analysis.records import size
from harness.app.command import hold, printer
from harness.errors import EXIT_ENVIRONMENT, EXIT_OK, EXIT_REGRESSION, InputError, interruptible
from harness.matrixfile.load import RANGE_FIX, check_param, parse_range, probe_cell
from harness.matrixfile.model import Cell
from harness.preflight import compile_scenarios
from harness.protocol.series import Series
from harness.report.html import Fit, chart
from harness.report.html import Line as ChartLine
from harness.result.model import CellResult
from harness.runtimes import Engines
from harness.runtimes.base import own_cgroup, parse_size
from harness.stages.options import apply_overrides
from harness.stages.orchestrator import Sweep, prefetch_analysis
from harness.store import RunStore
from harness.store.gate import why_not_current
from harness.store.runs import FIT as FIT_RUN

if TYPE_CHECKING:
    from harness.matrixfile.model import Matrix


# A probe's outcome: fits, a failure kind (kept apart so a crash never reads as OOM), or a
# stop (nothing measured: the row cannot go on).
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

    `fits`: largest value seen fitting (lo - 1: none); `fails`: smallest failing above it
    (hi + 1: none); on `done` the answer is `fits`. `how`: doubling, predicted, bisection.
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
        lo, hi, seen: The inclusive range; each probed value's "fit", `FAILURES` or `STOPS`.
        runs, predicted: Probes run (not from disk); the memory model's largest fit, or None.

    Raises: ValueError: an empty range, a value outside it, or an unknown outcome.
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
        # Probe floor(predicted) and the value above it, the one leaving fewer
        # candidates first.
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


# Memory per unit
# Sample keys of the memory sources -> result names. `cgroup` is the cell's only where its
# runtime gave it its own (`own_cgroup`); otherwise it is never fitted as the cell's.
SOURCES: dict[str, str] = {"gpu_used": "gpu", "fw": "fw", "rss": "rss", "rss_anon": "rss_anon",
                           "uss": "uss", "heap": "heap", "cgroup": "cgroup"}
DEVICE = ("fw", "gpu")            # limited by the GPU's memory
HOST = ("rss_anon", "rss")        # limited by mem_limit; anonymous first (file pages reclaim)
MiB = 1 << 20


@dataclass(frozen=True)
class Line:
    """peak = fixed + per_unit * value, fitted through `points` (value, peak bytes)."""

    source: str
    fixed: float
    per_unit: float
    points: tuple[tuple[int, float], ...]

    def at(self, value: float) -> float:
        return self.fixed + self.per_unit * value

    def limit_value(self, limit: float) -> float | None:
        """The value at which the line reaches `limit` (None: memory does not grow)."""
        if self.per_unit <= 0:
            return None
        return (limit - self.fixed) / self.per_unit

    @property
    def resolved(self) -> bool:
        """Whether the fixed part reads as memory (intercept >= 0); a negative one means
        the line does not hold down to 0, though its slope and limit still stand."""
        return self.fixed >= 0

    def text(self, unit: str) -> str:
        """'fixed 1.1 GiB + 450 MiB per batch', or '450 MiB per batch, fixed part not resolved'."""
        if self.resolved:
            return f"fixed {size(self.fixed)} + {size(self.per_unit)} per {unit}"
        why = "the fit's intercept is below zero"
        if self.per_unit > 0:
            why += (f": the line through the probes is under 0 bytes below {unit}="
                    f"{-self.fixed / self.per_unit:.3g}")
        return f"{size(self.per_unit)} per {unit}, fixed part not resolved ({why})"




def peaks(series: Series, runtime: str) -> dict[str, float]:
    """The peak of each of the cell's memory sources (the cgroup's only where its own).

    A peak can fall between samples, so `rss_hwm` raises the RSS peak, and the anonymous
    peak to it less the largest file-backed part any sample read (file pages reclaim)."""
    out: dict[str, float] = {}
    for key, name in SOURCES.items():
        if name == "cgroup" and not own_cgroup(runtime):
            continue
        peak = series.cols.peaks.get(key)
        if peak is not None and math.isfinite(peak):
            out[name] = peak
    hwm = (series.end or {}).get("rss_hwm")    # an int where given (protocol.ingest)
    if hwm:
        out["rss"] = max(out.get("rss", 0.0), float(hwm))
        files = [float(s["rss"]) - float(s["rss_anon"]) for s in series.samples
                 if s.get("rss") is not None and s.get("rss_anon") is not None]
        if files and "rss_anon" in out:
            out["rss_anon"] = max(out["rss_anon"], float(hwm) - max(files))
    return out


def fit_line(source: str, points: Sequence[tuple[int, float]]) -> Line | None:
    """Least squares through at least two distinct values; None with fewer."""
    pts = tuple(sorted(points))
    if len({v for v, _ in pts}) < 2:
        return None
    n = len(pts)
    mx = sum(v for v, _ in pts) / n
    my = sum(p for _, p in pts) / n
    sxx = sum((v - mx) ** 2 for v, _ in pts)
    sxy = sum((v - mx) * (p - my) for v, p in pts)
    slope = sxy / sxx
    return Line(source, my - slope * mx, slope, pts)


def fit_sources(by_value: Mapping[int, Mapping[str, float]]) -> dict[str, Line]:
    """One line per source seen in at least two fitting probes' peaks."""
    names = sorted({s for p in by_value.values() for s in p})
    out: dict[str, Line] = {}
    for name in names:
        line = fit_line(name, [(v, p[name]) for v, p in by_value.items() if name in p])
        if line is not None:
            out[name] = line
    return out


def limiting(lines: Mapping[str, Line], device_limit: float | None,
             host_limit: float | None) -> tuple[Line, float] | None:
    """(line, limit) for the first growing line with a known limit: device (framework
    allocator first), then host; None when neither applies."""
    for names, limit in ((DEVICE, device_limit), (HOST, host_limit)):
        if limit is None:
            continue
        for name in names:
            if name in lines and lines[name].per_unit > 0:
                return lines[name], limit
    return None


# The probes' runs
Probe = tuple[CellResult, Series]
Runner = Callable[[Cell], Probe]
Cache = Callable[[Cell], "Probe | None"]
Say = Callable[[str], None]
REPORT_LINES = 8       # allocation report entries kept for the first failing probe


@dataclass(frozen=True)
class Target:
    """The param to fit and its inclusive range."""

    param: str
    lo: int
    hi: int

    def __post_init__(self) -> None:
        if self.hi < self.lo:
            raise ValueError(f"{self.param}={self.lo}..{self.hi}: empty range")


def outcome_of(verdict: str) -> str:
    """A probe's verdict as the planner reads it: fits, a kind of failure, or a stop."""
    if verdict in FAILURES or verdict in STOPS:
        return verdict
    return FIT


@dataclass
class ProbeResult:
    value: int
    result: CellResult
    outcome: str
    peaks: dict[str, float]
    cached: bool

    @property
    def answer(self) -> str:
        """"runs", or how it failed (oom, crash, ...); a bad within-run verdict is said
        beside it ("runs (leak)"), since a leak still ran."""
        if self.outcome != FIT:
            return self.outcome
        verdict = self.result.verdict
        return f"runs ({verdict})" if verdict in BAD else "runs"


@dataclass
class FitRow:
    """One row's answer: the largest value that fits, with every probe behind it."""

    cell: Cell
    target: Target
    step: FitStep
    probes: dict[int, ProbeResult] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)       # values in the order probed
    runs: int = 0
    reused: int = 0
    device_limit: float | None = None
    host_limit: float | None = None

    @property
    def bound(self) -> int:
        return probe_bound(self.target.lo, self.target.hi)

    @property
    def found(self) -> bool:
        return self.step.action == "done"

    @property
    def max_fit(self) -> int | None:
        """The answer (None: even the smallest value does not fit, or no answer)."""
        if not self.found or self.step.fits < self.target.lo:
            return None
        return self.step.fits

    @property
    def first_fail(self) -> ProbeResult | None:
        return self.probes.get(self.step.fails)

    def lines(self) -> dict[str, Line]:
        return fit_sources({v: p.peaks for v, p in self.probes.items()
                                   if p.outcome == FIT})

    def prediction(self) -> tuple[Line, float, float] | None:
        """(line, limit, predicted value) where a fitted line meets a known limit."""
        hit = limiting(self.lines(), self.device_limit, self.host_limit)
        if hit is None:
            return None
        line, limit = hit
        value = line.limit_value(limit)
        return None if value is None else (line, limit, value)

    def allocation_top(self) -> list[str]:
        """The framework's account of what held memory at the first failing value."""
        fail = self.first_fail
        if fail is None:
            return []
        r = fail.result
        text = r.outcome.log_tail + "\n" + (r.end.error.traceback if r.end.error else "")
        return allocation_report(text, REPORT_LINES)

    def sentence(self) -> str:
        """'fits 16 (17: oom)', or why there is no answer."""
        t = self.target
        if self.step.action == "stop":
            return f"stopped: {self.step.why}"
        if not self.found:
            return "undecided"
        fail = self.first_fail
        failed = f" ({fail.value}: {fail.outcome})" if fail is not None else ""
        if self.max_fit is None:
            return f"nothing fits: {t.param}={t.lo} is {fail.outcome if fail else '?'}"
        if self.max_fit == t.hi:
            return f"fits {t.hi} (the whole range)"
        return f"fits {self.max_fit}{failed}"


def fit_row(cell: Cell, target: Target, runner: Runner, say: Say,
            cache: Cache | None = None) -> FitRow:
    """Find the largest value of `target.param` that fits in `cell`'s row.

    Args:
        cell, target: The row's cell as the matrix gives it; the param and its range.
        runner, say: Runs a probe cell to its result and samples; one line per probe.
        cache: A finished probe on disk, or None; read for every value first.

    Raises: InputError: a probe's agent says the scenario never read the param (exit 2).
    """
    row = FitRow(cell, target, FitStep("probe", None, target.lo - 1, target.hi + 1))
    seen: dict[int, str] = {}
    if cache is not None:
        for value in range(target.lo, target.hi + 1):
            got = cache(probe_cell(cell, target.param, value))
            if got is not None:
                _record(row, seen, value, got, cached=True)
                check_read(target.param, got[1])
    while True:
        pred = row.prediction()
        row.step = plan_fit(target.lo, target.hi, seen, row.runs,
                            pred[2] if pred is not None else None)
        if row.step.action != "probe":
            break
        assert row.step.value is not None
        value = row.step.value
        got = runner(probe_cell(cell, target.param, value))
        row.runs += 1
        _record(row, seen, value, got, cached=False)
        check_read(target.param, got[1])
        p = row.probes[value]
        how = row.step.how + (f" {pred[2]:.1f}" if row.step.how == "predicted" and pred else "")
        say(f"{cell.id} {target.param}={value} [{how}, run {row.runs}/{row.bound}]: "
            f"{p.answer}" + ("" if p.outcome == FIT else f" ({p.result.reason[:160]})"))
    return row


def check_read(param: str, series: Series) -> None:
    """Stop when a probe's agent says the scenario never read `param` ("fits the whole
    range" would mean nothing); a probe without `params_read` tells nothing.

    Raises:
        InputError: the scenario's run never read params[param].
    """
    read = series.params_read()
    if read is None or param in read:
        return
    names = ", ".join(read) or "no param"
    raise InputError(f"fit --param {param}: the scenario's setup never read "
                     f"params[{param!r}] (it read: {names})\n"
                     f"  fix: fit a param the scenario reads, or read params[{param!r}] "
                     "in its setup")


def _record(row: FitRow, seen: dict[int, str], value: int, got: Probe, cached: bool) -> None:
    result, series = got
    outcome = outcome_of(result.verdict)
    seen[value] = outcome
    row.probes[value] = ProbeResult(value, result, outcome, peaks(series, result.runtime),
                                    cached)
    row.order.append(value)
    if cached:
        row.reused += 1
    # The limit the runtime applied (e.g. Slurm's, with headroom) wins over the matrix's.
    said = result.outcome.mem_limit_bytes
    if said:
        row.host_limit = max(row.host_limit or 0.0, float(said))
    elif row.host_limit is None:
        row.host_limit = _host_limit(result, row.cell)
    if row.device_limit is None and row.cell.gpu.wants_gpu:
        row.device_limit = _device_limit(result, row.cell)


def _host_limit(result: CellResult, cell: Cell) -> float | None:
    if result.outcome.mem_limit_bytes:
        return float(result.outcome.mem_limit_bytes)
    if not own_cgroup(result.runtime):   # no cgroup of its own: mem_limit is not applied
        return None
    limit = parse_size(cell.settings.mem_limit)
    return float(limit) if limit else None


def _device_limit(result: CellResult, cell: Cell) -> float | None:
    gpus = result.host.gpus
    pick = [g for g in gpus if str(g.index) == cell.gpu.value] or list(gpus[:1])
    total = pick[0].memory_total if pick else None
    return float(total) if total else None


def first_smaller(rows: Sequence[FitRow]) -> tuple[FitRow, FitRow] | None:
    """(before, after): the first image whose boundary drops by more than one step;
    `rows` are one row's answers in image order, unanswered ones skipped."""
    done = [r for r in rows if r.found]
    for before, after in itertools.pairwise(done):
        if _boundary(before) - _boundary(after) > 1:
            return before, after
    return None


def _boundary(row: FitRow) -> int:
    return row.step.fits       # lo - 1 when nothing fits


def by_row(rows: Iterable[FitRow]) -> dict[str, list[FitRow]]:
    """Rows grouped by (host x) GPU x scenario, each in image order."""
    out: dict[str, list[FitRow]] = {}
    for r in rows:
        out.setdefault(r.cell.row, []).append(r)
    def index(r: FitRow) -> int:
        return r.cell.image.index

    return {k: sorted(v, key=index) for k, v in out.items()}


def smaller_sentence(pair: tuple[FitRow, FitRow]) -> str:
    """'22.12 fits 8, 20.12 fits 16 on gpu0: first smaller: 22.12'."""
    before, after = pair
    p = after.target.param
    return (f"{after.cell.image.label} fits {p}={_boundary(after)}, "
            f"{before.cell.image.label} fits {_boundary(before)} on {after.cell.row}: "
            f"first smaller: {after.cell.image.label}")


def sweep_runner(sweep: Sweep) -> Runner:
    """Probes through `Sweep.run_cell`, each result written once, its samples kept."""
    def run(cell: Cell) -> Probe:
        measured = sweep.run_cell(cell)
        sweep.series.keep(cell.id, measured.series)
        sweep.store.write_cell(measured.result)
        return measured.result, measured.series

    return run


def store_cache(sweep: Sweep, say: Say | None = None) -> Cache:
    """Probes the store holds whose key still matches; a stale one is said and rerun."""
    def cache(cell: Cell) -> Probe | None:
        result = sweep.store.load_cell(cell.id)
        if result is None:
            return None
        why = why_not_current(result, cell, sweep.runtime_for(cell).name)
        if why is not None:
            if say is not None:
                say(f"{cell.id}: {why}; running it again")
            return None
        series = sweep.series(cell.id)
        return result, series if series is not None else Series()

    return cache


def predicted_boundary(row: FitRow) -> int | None:
    """The largest whole value under the limit on the fitted line, or None."""
    pred = row.prediction()
    return math.floor(pred[2]) if pred is not None else None


@dataclass(frozen=True)
class FitAsked:
    """What `harness fit` is asked (its flags).

    Attributes:
        matrix, select, param: The matrix file; `-k`; NAME=LO..HI (default: its `fit:` block).
        out: The reports folder: probes go to OUT/NAME/fit-PARAM/, reused there.
        runtime, docker_host, quiet: Another runtime and its engine; no progress lines.
        iterations, warmup, budget: Each probe's lengths.
    """

    matrix: Path
    param: str | None = None
    select: str | None = None
    out: Path = Path("reports")
    runtime: str | None = None
    docker_host: str | None = None
    iterations: int | None = None
    warmup: int | None = None
    budget: str | float | None = None
    quiet: bool = False


def fit_command(asked: FitAsked) -> tuple[int, FitReport, Path]:
    """Fit each selected row and write the files: (exit code, answer, directory).

    Raises:
        InputError: nothing to fit, a malformed --param, a scenario that does not compile.
    """
    matrix = matrixfile.load(asked.matrix)
    target = target_of(matrix, asked.param)
    cells = apply_overrides(matrixfile.select(matrix.cells, asked.select), asked.iterations,
                            asked.warmup, asked.budget)
    compile_scenarios(cells)
    rows, store = fit_rows(asked, matrix, cells, target)
    report = FitReport.from_rows(rows)
    for name, text in report.files().items():
        store.write(name, text)
    if report.smaller:
        code = EXIT_REGRESSION
    elif any(r.step.action == "stop" and r.step.why.startswith("unavailable") for r in rows):
        code = EXIT_ENVIRONMENT
    else:
        code = EXIT_OK
    return code, report, store.root


def target_of(matrix: Matrix, given: str | None) -> Target:
    """The param and range: `--param`, else the matrix's `fit:` block.

    Raises:
        InputError: neither is given, or `--param` is malformed.
    """
    if given is None:
        if matrix.fit is None:
            raise InputError(f"{matrix.file}: nothing to fit; pass --param NAME=LO..HI (e.g. "
                             "--param batch=1..64) or add `fit: {param: batch, range: 1..64}` "
                             "to the matrix")
        return Target(matrix.fit.param, matrix.fit.lo, matrix.fit.hi)
    name, eq, text = given.partition("=")
    bounds = parse_range(text)
    if not eq or bounds is None:
        raise InputError(f"--param {given}: expected NAME=LO..HI; {RANGE_FIX}")
    problem = check_param(name.strip(), matrix.scenarios)
    if problem is not None:
        raise InputError(f"--param {given}: {problem} (in {matrix.file})")
    return Target(name.strip(), bounds[0], bounds[1])


def fit_rows(asked: FitAsked, matrix: Matrix, cells: list[Cell], target: Target
             ) -> tuple[list[FitRow], RunStore]:
    """Each row's answer, probed in <out>/<name>/fit-<param> so a later fit reuses them."""
    hold(prefetch_analysis())
    engines = Engines.for_matrix(matrix, asked.runtime or matrix.runtime, asked.docker_host)
    engines.start(cells)
    store = RunStore(asked.out / matrix.name / f"fit-{target.param}")
    store.lock()
    # A closed stdout or stderr stops the probes as Ctrl-C does (harness.errors).
    with interruptible():
        print(f"fit {target.param} in {target.lo}..{target.hi} over {len(cells)} row(s): at most "
              f"{_bound(target)} probes per row; cells in {store.root}", flush=True)
        rows = []
        with engines.stopped(store.unlock):
            sweep = Sweep(matrix, engines.default, store, printer(asked.quiet), engines.by_host)
            store.write("matrix.yaml", asked.matrix.read_text(encoding="utf-8"))
            store.mark(FIT_RUN, matrix.name, str(asked.matrix))
            runner = sweep_runner(sweep)
            cache = store_cache(sweep, lambda s: print(s, flush=True))
            for cell in cells:
                rows.append(fit_row(cell, target, runner, lambda s: print(s, flush=True), cache))
    return rows, store


def _bound(target: Target) -> int:
    return probe_bound(target.lo, target.hi)


# The answers: fit.json, fit.md, fit.html and the console text
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


@dataclass(frozen=True)
class FitReport:
    param: str
    lo: int
    hi: int
    rows: tuple[FitRow, ...]
    smaller: tuple[tuple[FitRow, FitRow], ...]

    @classmethod
    def from_rows(cls, rows: Sequence[FitRow]) -> FitReport:
        t = rows[0].target
        found = [first_smaller(group) for group in by_row(rows).values()]
        return cls(t.param, t.lo, t.hi, tuple(rows), tuple(p for p in found if p))

    @property
    def scenarios(self) -> list[str]:
        return sorted({r.cell.scenario.id for r in self.rows})

    def sentences(self) -> list[str]:
        return [smaller_sentence(p) for p in self.smaller]

    # ------------------------------------------------------------------ JSON
    def to_json(self) -> dict[str, object]:
        return {"param": self.param, "range": [self.lo, self.hi],
                "bound": self.rows[0].bound if self.rows else None,
                "rows": [_row_json(r) for r in self.rows],
                "first_smaller": [{"row": b.cell.row, "image": a.cell.image.label,
                                   "boundary": a.step.fits, "before": b.cell.image.label,
                                   "before_boundary": b.step.fits,
                                   "sentence": smaller_sentence((b, a))}
                                  for b, a in self.smaller]}

    # ------------------------------------------------------------------ text
    def markdown(self) -> str:
        out = [f"# fit: largest {self.param} in {self.lo}..{self.hi} that runs", ""]
        for sid in self.scenarios:
            rows = [r for r in self.rows if r.cell.scenario.id == sid]
            images = sorted({(r.cell.image.index, r.cell.image.label) for r in rows})
            where = sorted({r.cell.row for r in rows})
            out += [f"## {sid}", "", "| row | " + " | ".join(lb for _, lb in images) + " |",
                    "| --- |" + " --- |" * len(images)]
            for w in where:
                cells = {r.cell.image.label: r.sentence() for r in rows if r.cell.row == w}
                out.append(f"| {w} | " + " | ".join(cells.get(lb, "") for _, lb in images)
                           + " |")
            out.append("")
        said = self.sentences()
        out += [*(f"**{s}**" for s in said)] or ["no image's boundary is lower than the one "
                                                  "before it by more than one step"]
        out.append("")
        for r in self.rows:
            out += [f"### {r.cell.id}", "", *(f"- {ln}" for ln in row_lines(r)), ""]
        return "\n".join(out)

    def console(self) -> str:
        out: list[str] = []
        for sid in self.scenarios:
            out.append(f"{sid}: largest {self.param} in {self.lo}..{self.hi} that runs")
            for r in (r for r in self.rows if r.cell.scenario.id == sid):
                out.append(f"  {r.cell.image.label:<20} {r.cell.row:<24} {r.sentence()}")
                out += [f"      {ln}" for ln in row_lines(r)[1:]]
        out += self.sentences() or ["no first smaller image: no boundary lower than the one "
                                    "before it by more than one step"]
        return "\n".join(out)

    # ------------------------------------------------------------------ HTML
    def html(self) -> str:
        body = [f"<h1>fit: largest {escape(self.param)} in {self.lo}..{self.hi} that runs</h1>"]
        body += [f"<p><b>{escape(s)}</b></p>" for s in self.sentences()]
        for r in self.rows:
            body.append(f"<h2>{escape(r.cell.id)}: {escape(r.sentence())}</h2><ul>")
            body += [f"<li>{escape(ln)}</li>" for ln in row_lines(r)[1:]]
            body.append("</ul>")
            body.append(str(plot(r)))
        return ("<!doctype html><html><head><meta charset='utf-8'><title>fit</title>"
                "<style>body{font-family:sans-serif;margin:2em}</style></head><body>"
                + "\n".join(body) + "</body></html>\n")

    def files(self) -> dict[str, str]:
        """The text of each file the fit writes into its results directory."""
        return {"fit.json": json.dumps(self.to_json(), indent=1) + "\n",
                "fit.md": self.markdown() + "\n", "fit.html": self.html()}


def row_lines(r: FitRow) -> list[str]:
    """The answer, then the probes, the memory per unit and the allocation report."""
    p = r.target.param
    probes = ", ".join(f"{v}:{r.probes[v].answer}" + ("*" if r.probes[v].cached else "")
                       for v in r.order)
    out = [r.sentence(), f"probes ({r.runs} run, {r.reused} reused*, bound {r.bound}): {probes}"]
    lines = r.lines()
    for name, line in lines.items():
        out.append(f"{name}: {line.text(p)}")
    pred = r.prediction()
    if pred is not None:
        line, limit, value = pred
        text = (f"predicted: {line.source} reaches the limit {size(limit)} at {p}={value:.1f}"
                f" -> fits {math.floor(value)}")
        if r.found and r.max_fit is not None and r.max_fit < r.target.hi:
            err = (math.floor(value) - r.max_fit) / r.max_fit
            text += f"; found {r.max_fit} ({err:+.1%})"
        out.append(text)
    elif lines:
        out.append("predicted: no limit known for the fitted sources (set mem_limit, or run "
                   "on a GPU)")
    fail = r.first_fail
    if fail is not None:
        out.append(f"first failure {p}={fail.value}: {fail.result.verdict} "
                   f"({fail.result.reason[:200]})")
        top = r.allocation_top()
        if top:
            out += [f"allocation report: {ln}" for ln in top]
        elif fail.outcome == OOM:
            out.append("allocation report: none (the process was killed from outside, or "
                       "the framework printed none)")
    if r.step.conflicts:
        out.append(f"not monotonic: failed at {r.step.conflicts} below {r.step.fits}, which "
                   "fit (a flaky failure, or memory that depends on more than the param)")
    return out


def _row_json(r: FitRow) -> dict[str, object]:
    pred = r.prediction()
    fail = r.first_fail
    return {
        "cell": r.cell.id, "image": r.cell.image.label, "row": r.cell.row,
        "gpu": r.cell.gpu.label, "host": r.cell.host.label, "scenario": r.cell.scenario.id,
        "action": r.step.action, "why": r.step.why, "max_fit": r.max_fit,
        "fits": r.step.fits, "fails": r.step.fails, "sentence": r.sentence(),
        "runs": r.runs, "reused": r.reused, "bound": r.bound,
        "failure": None if fail is None else {"value": fail.value, "verdict":
                                              fail.result.verdict,
                                              "reason": fail.result.reason},
        "allocation_report": r.allocation_top(),
        "probes": [{"value": v, "answer": r.probes[v].answer,
                    "verdict": r.probes[v].result.verdict, "outcome": r.probes[v].outcome,
                    "cached": r.probes[v].cached,
                    "cell": r.probes[v].result.id, "peaks": r.probes[v].peaks}
                   for v in r.order],
        # `fixed` is None where the fit's intercept (kept as `intercept`) is below zero.
        "memory": {k: {"fixed": ln.fixed if ln.resolved else None, "intercept": ln.fixed,
                       "per_unit": ln.per_unit, "text": ln.text(r.target.param)}
                   for k, ln in r.lines().items()},
        "limits": {"device": r.device_limit, "host": r.host_limit},
        "prediction": None if pred is None else {
            "source": pred[0].source, "limit": pred[1], "value": pred[2],
            "boundary": math.floor(pred[2]),
            "error": ((math.floor(pred[2]) - r.max_fit) / r.max_fit
                      if r.max_fit and r.max_fit < r.target.hi else None)},
        "conflicts": list(r.step.conflicts),
    }


def plot(r: FitRow) -> str:
    """Peak memory against the param, one line per source, the limiting fit dashed."""
    fits = sorted(v for v, p in r.probes.items() if p.outcome == FIT)
    names = sorted({s for v in fits for s in r.probes[v].peaks})
    lines = [ChartLine([float(v) for v in fits if n in r.probes[v].peaks],
                      [r.probes[v].peaks[n] for v in fits if n in r.probes[v].peaks],
                      COLOURS[i % len(COLOURS)], n) for i, n in enumerate(names)]
    pred = r.prediction()
    fit = None
    if pred is not None and fits:
        line = pred[0]
        fit = Fit(line.per_unit, line.fixed, float(fits[0]), max(float(fits[-1]), pred[2]))
    drawn = str(chart(f"peak memory vs {r.target.param}", lines, "B", fit=fit,
                          headline=pred[0].text(r.target.param) if pred else ""))
    # The chart's x axis is labelled for iterations; here it is the param.
    return drawn.replace(">iteration</text>", f">{escape(r.target.param)}</text>")
