"""How much fits: drive `plan_fit` over one row (image x GPU x scenario), probe by probe.

Each probe is a normal cell, the row's cell with the param set to one value (id
`<cell id>.<param><value>`), run through an injected runner (in the CLI,
`Sweep.run_cell`; in tests, a FakeRuntime sweep), so an out-of-memory, a crash or a
timeout is decided as in any sweep. Probes already on disk are reused and cost nothing,
when the same run made them (their key, `harness.result.runkey`, matches).
The fitting probes' memory peaks give the memory-per-unit lines (`fit.memory`),
and, once two values fit and the limit is known, the predicted boundary the planner may
jump to.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.analysis.kinds import BAD
from harness.analysis.outcomes import allocation_report
from harness.errors import InputError
from harness.fit import memory
from harness.fit.steps import FAILURES, FIT, STOPS, FitStep, plan_fit, probe_bound
from harness.matrixfile.load import probe_cell
from harness.matrixfile.model import Cell
from harness.protocol.series import Series
from harness.result.model import CellResult
from harness.runtimes.base import own_cgroup, parse_size
from harness.store.gate import why_not_current

if TYPE_CHECKING:
    from harness.orchestrator import Sweep

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
        """Fit's answer for the value: "runs", or how it failed (oom, crash, ...). The
        within-run verdict is not that answer (an undecided leak still ran); a leak or a
        slowdown it found is said beside it: "runs (leak)"."""
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

    def lines(self) -> dict[str, memory.Line]:
        return memory.fit_sources({v: p.peaks for v, p in self.probes.items()
                                   if p.outcome == FIT})

    def prediction(self) -> tuple[memory.Line, float, float] | None:
        """(line, limit, predicted value) where a fitted line meets a known limit."""
        hit = memory.limiting(self.lines(), self.device_limit, self.host_limit)
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

    Raises:
        InputError: a probe's agent says the scenario never read the param (exit 2).

    Args:
        cell: The row's cell as the matrix gives it.
        target: The param and its range.
        runner: Runs a probe cell and returns its final result and samples.
        say: Receives one line per probe.
        cache: A finished probe on disk, or None; every value's cache is read first,
            so what an earlier fit learnt is not paid for again.
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
    """Stop at the first probe whose agent says the scenario never read `param`: every
    value would run the same scenario, and "fits the whole range" would be no answer.
    A probe without the agent's `params_read` (killed before its end record, a plain
    script, an older agent) tells nothing; the next one is checked.

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
    row.probes[value] = ProbeResult(value, result, outcome, memory.peaks(series, result.runtime),
                                    cached)
    row.order.append(value)
    if cached:
        row.reused += 1
    # The limit the runtime applied wins over the matrix's (a Slurm job is given its
    # mem_limit plus headroom): taken from any probe that says it, OOM-killed ones too.
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
    """(the row before, the first row) where a later image's boundary is lower than the
    one before it by more than one step; `rows` are one (host x) GPU x scenario row's
    answers in image order. A row without an answer is skipped."""
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
    """Probes a store already holds (result and samples), when the same run made them
    (their key matches the probe's now); a probe whose key changed is said, with why,
    and run again in its place."""
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
