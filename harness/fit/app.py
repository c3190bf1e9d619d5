"""`harness fit`'s work: each row's largest value that runs, probed in the fit's own
directory, and fit.md / fit.json / fit.html written from one model (`FitReport`), so every
renderer says the same; `cli.fit` parses and prints.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

from harness import matrixfile
from harness.analysis.kinds import OOM
from harness.analysis.records import size
from harness.app.command import hold, printer
from harness.errors import EXIT_ENVIRONMENT, EXIT_OK, EXIT_REGRESSION, InputError
from harness.fit.plan import (
    FIT,
    FitRow,
    Target,
    by_row,
    first_smaller,
    fit_row,
    probe_bound,
    smaller_sentence,
    store_cache,
    sweep_runner,
)
from harness.matrixfile.load import RANGE_FIX, check_param, parse_range
from harness.preflight import compile_scenarios
from harness.report.html import Fit, Line, chart
from harness.runtimes import Engines
from harness.signals import interruptible
from harness.stages.options import apply_overrides
from harness.stages.orchestrator import Sweep, prefetch_analysis
from harness.store import RunStore
from harness.store.runs import FIT as FIT_RUN

if TYPE_CHECKING:
    from harness.matrixfile.model import Cell, Matrix


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
    # A closed stdout or stderr stops the probes as Ctrl-C does (harness.signals).
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
    lines = [Line([float(v) for v in fits if n in r.probes[v].peaks],
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
