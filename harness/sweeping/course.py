"""`harness sweep`'s course: one list of named steps (`COURSE`) run over one `Sweeping`,
and what the steps and the commands share. The command reads and checks the matrix
before it (`preflight`), and prints the table and `exit_code` after. The sweep's progress:
`progress_for(quiet, samples)` gives plain `harness: ...` lines (`PlainProgress`), nothing
with `-q`, or on a TTY the live display (`report.live`), so a sweep into a pipe imports
no rich.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from harness import report as reports
from harness.analysis.rules import BUSY_HOST, TIMEOUT_BUSY, UNSETTLED
from harness.app.command import exit_code as exit_code  # the sweep's exit, read here too
from harness.app.command import hold
from harness.errors import interruptible
from harness.preflight import check_lengths, compile_scenarios, floor_caps
from harness.report.grid import console_width, wrap
from harness.result.model import Planned
from harness.runtimes import Engines
from harness.stages.options import SweepOptions
from harness.stages.orchestrator import Sweep, prefetch_analysis
from harness.store import RunStore
from harness.store.gate import kept_plan
from harness.store.runs import SWEEP, begun_of, made_from, matrix_named, runs_of
from harness.store.runs import shown as path_shown

if TYPE_CHECKING:
    from harness.matrixfile.model import Cell, Matrix
    from harness.report import Report
    from harness.report.live import LiveProgress
    from harness.result.codec import JSON
    from harness.result.model import CellResult
    from harness.runtimes.base import Progress
    from harness.stages.orchestrator import SweepOutcome


@dataclass
class Sweeping:
    """One sweep on its course: what it was asked, and what each step found."""

    asked: SweepOptions
    matrix: Matrix
    cells: list[Cell]
    progress: Progress
    # What stays open until the course ends, closed backwards (on an error too).
    held: contextlib.ExitStack[bool | None] = field(init=False)
    engines: Engines = field(init=False)
    resume: bool | Path = field(init=False)
    started: float = field(init=False)
    store: RunStore = field(init=False)
    prefetch: threading.Thread = field(init=False)
    planned: tuple[Planned, ...] = field(init=False)
    live: PlainProgress | LiveProgress = field(init=False)
    display: contextlib.ExitStack[bool | None] = field(init=False)   # the live display's close
    before: dict[str, JSON] | None = field(init=False)
    outcome: SweepOutcome = field(init=False)
    report: Report = field(init=False)
    paths: list[Path] = field(init=False)


def start_engines(s: Sweeping) -> None:
    """The runtimes the matrix asks (`--runtime`, `--docker-host`), started."""
    s.engines = Engines.for_matrix(s.matrix, s.asked.runtime or s.matrix.runtime,
                                   s.asked.docker_host)
    s.resume = Path(s.asked.resume) if isinstance(s.asked.resume, str) else s.asked.resume
    s.started = time.time()
    s.engines.start(s.cells, s.progress)


def open_store(s: Sweeping) -> None:
    """The results directory opened (or resumed), its matrix.yaml and plan written."""
    asked, matrix, resume, started = s.asked, s.matrix, s.resume, s.started
    s.held.enter_context(interruptible())
    s.store = RunStore.open(asked.out, matrix.name, resume, asked.matrix, started)
    # After every other import of this command, so two threads never import one module.
    s.prefetch = hold(prefetch_analysis(*REPORTERS, then=compile_report_template))
    s.held.enter_context(s.engines.stopped(s.store.unlock))
    s.store.write("matrix.yaml", asked.matrix.read_text(encoding="utf-8"))
    s.planned = plan_of(s.cells)
    # Absolute, so it is found from any directory; a resumed run keeps its first start.
    s.store.mark(SWEEP, matrix.name, str(asked.matrix.resolve()),
                 kept_plan(s.store.root, matrix, s.planned) if resume else s.planned,
                 begun_of(s.store.root) if resume else started, started if resume else None)
    s.progress(f"{len(s.cells)} cell{'' if len(s.cells) == 1 else 's'}, runtime "
               f"{s.engines.default.name}, results in {s.store.root}")
    if (other := shared_name(s.store.root, matrix.name, asked.matrix)) is not None:
        s.progress(f"note: {path_shown(s.store.root.parent)} also holds runs of "
                   f"{other}, another matrix file named {matrix.name!r}: report, "
                   "history and compare read them as this one's runs\n  fix: "
                   f"give {asked.matrix.name} a name: of its own")
    s.live = progress_for(asked.quiet, s.store.samples_path)
    s.display = s.held.enter_context(contextlib.ExitStack())
    s.display.callback(s.live.close)
    s.before = prior_meta(s.store.root) if resume else None


def run_lanes(s: Sweeping) -> None:
    """The cells run in lanes, each down its way (`orchestrator.Sweep.run`)."""
    s.outcome = Sweep(s.matrix, s.engines.default, s.store, s.live, s.engines.by_host).run(
        s.cells, bool(s.resume))


def answer_after(s: Sweeping) -> None:
    """What an option asks once the cells ran (`after`)."""
    asked = s.asked
    if not (asked.between or asked.explain or asked.find_cause):
        return
    # lazy: the plans only an option runs load after the cells ran
    from harness.sweeping import after

    if asked.between and not asked.find_cause:  # --find-cause does it
        after.culprit_after(s.matrix, s.engines.default, s.engines.by_host, s.store.root,
                            s.live, s.outcome.results, s.planned, s.cells)
    if asked.explain or asked.find_cause:   # their answers go into the reports
        after.after_sweep(asked, s.matrix, s.engines, s.store,
                          s.live if asked.find_cause else s.progress,
                          s.outcome.results, s.planned)


def write_reports(s: Sweeping) -> None:
    """The live display closed, then the report model and every report file."""
    s.display.close()
    s.prefetch.join()   # the reporters were imported while the cells ran
    s.report, s.paths = reported(s.outcome, s.planned, s.store, {
        "matrix": str(s.asked.matrix), "runtime": s.engines.default.name,
        "started": s.started, "baseline": s.matrix.baseline}, s.matrix.name, s.before)


# The course of a sweep, in order, each step filling in its part of `Sweeping`.
COURSE: tuple[Callable[[Sweeping], None], ...] = (
    start_engines,  # no engine or GPU: exit 3, before any results directory exists
    open_store,     # the results directory; NumPy and the reporters load meanwhile
    run_lanes,      # the cells in lanes, each down its way: measure -> settle -> store
    answer_after,   # --between's culprit searches, --explain, --find-cause
    write_reports,  # the live display closed, the report model and every report file
)


def sweep_and_report(asked: SweepOptions, matrix: Matrix, cells: list[Cell],
                     progress: Progress) -> tuple[Report, Path, list[Path]]:
    """Sweep the cells down `COURSE`; the report model, results directory and files.

    Raises:
        EngineUnavailable: no engine or GPU (exit 3, before a results directory exists).
    """
    sweeping = Sweeping(asked, matrix, cells, progress)
    with contextlib.ExitStack() as sweeping.held:
        for step in COURSE:
            step(sweeping)
    return sweeping.report, sweeping.store.root, sweeping.paths


def preflight(cells: list[Cell], matrix: Matrix, iterations: int | None) -> list[Cell]:
    """Check the cells before any container; the cells as they will run (caps raised).

    Raises:
        InputError: a scenario that does not compile, or a refused length.
    """
    compile_scenarios(cells)
    for warning in check_lengths(cells, matrix.analysis, refuse=iterations is not None):
        print(f"harness: {warning}", file=sys.stderr)
    if iterations is not None:
        cells, raised = floor_caps(cells, matrix.analysis, iterations)
        if raised is not None:
            print(f"harness: {raised}", file=sys.stderr)
    return cells


def refused(asked: SweepOptions, matrix: Matrix) -> None:
    """What a sweep refuses of the matrix before any engine is asked (`sweep --list` too).

    Raises:
        InputError: as `Engines.for_matrix` does.
    """
    Engines.for_matrix(matrix, asked.runtime or matrix.runtime, asked.docker_host)


def prior_meta(root: Path) -> dict[str, JSON]:
    """The earlier part of a resumed sweep's results.json meta; {} where it wrote none."""
    try:
        data = json.loads((root / "results.json").read_bytes())
    except (OSError, ValueError):
        return {}
    meta = data.get("meta") if isinstance(data, dict) else None
    return meta if isinstance(meta, dict) else {}


def _number(meta: Mapping[str, JSON], key: str) -> float | None:
    value = meta.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def reported(outcome: SweepOutcome, planned: tuple[Planned, ...], store: RunStore,
             meta: dict[str, JSON], name: str, before: dict[str, JSON] | None = None
             ) -> tuple[Report, list[Path]]:
    """The sweep's report model, every report file written; a resumed one's as a whole."""
    counts: dict[str, JSON] = {"seconds": round(outcome.seconds, 3), "ran": outcome.ran,
                               "reused": outcome.reused}
    if before is not None:
        counts = {
            "seconds": round(outcome.seconds + (_number(before, "seconds") or 0.0), 3),
            "ran": outcome.ran + outcome.reused, "reused": 0}
        meta = {**meta, "started": begun_of(store.root), "resumed": meta.get("started")}
    report = reports.Report.from_results(name, outcome.results, {**meta, **counts},
                                         store.root, outcome.series, planned)
    return report, reports.write_all(store, report)


def how_to_decide(report: Report, matrix: Path, root: Path, cells: Sequence[Cell]) -> str:
    """The command that decides what is not decided (--resume, a longer run, a quieter host)."""
    undecided = report.undecided_cells
    scripts = [c for c in undecided if report.results[c].end.mode == "script"]
    if scripts and len(scripts) == len(undecided) and not report.missing_cells:
        return ("whole scripts run once and ended too soon to decide: define "
                "setup(params) and step(state) in them")
    if not undecided:
        return f"harness sweep {path_shown(matrix)} --resume {path_shown(root)} runs them"
    if not report.missing_cells and all(report.results[c].rule == BUSY_HOST
                                        for c in undecided):
        return (f"the host was busy while {'their' if len(undecided) > 1 else 'its'} steps "
                f"were timed (rule busy-host), which a longer run does not cure: harness "
                f"sweep {path_shown(matrix)} again on a quieter host")
    if not report.missing_cells and all(report.results[c].rule == TIMEOUT_BUSY
                                        for c in undecided):
        return (f"the host took most of {'their' if len(undecided) > 1 else 'its'} time "
                f"before the timeout killed {'them' if len(undecided) > 1 else 'it'} "
                f"(rule timeout-busy): harness sweep {path_shown(matrix)} again on a "
                "quieter host, or raise timeout:")
    if not report.missing_cells and all(report.results[c].rule == UNSETTLED
                                         for c in undecided):
        asked = max((c.settings.rounds for c in cells if c.id in undecided), default=0)
        return (f"{'their' if len(undecided) > 1 else 'its'} confirmation rounds against the "
                f"baseline left the doubt open (rule unsettled), which a longer run does not "
                f"settle: more rounds (`rounds: {2 * asked or 6}` in the matrix's "
                f"`defaults:`) or a quieter host")
    budgets = [b for c in cells if c.id in undecided
               and (b := c.settings.run_budget) is not None]
    if budgets:     # a budgeted cell runs longer by its seconds, not its cap
        return f"run longer: harness sweep {path_shown(matrix)} --budget {4 * max(budgets):g}s"
    longest = max((c.settings.max_iterations or c.settings.iterations for c in cells
                   if c.id in undecided), default=0)
    return f"run longer: harness sweep {path_shown(matrix)} --iterations {2 * longest or 1000}"


# What the reports need, imported while the first container runs (prefetch_analysis).
REPORTERS = ("harness.report.model", "harness.report.console", "harness.report.ci",
             "harness.report.html")


def compile_report_template() -> None:
    """report.html's template, compiled ahead (on the prefetch thread)."""
    reports.environment().get_template("report.html.j2")


def plan_of(cells: list[Cell]) -> tuple[Planned, ...]:
    """plan.json's cells: what a report checks the directory against."""
    return tuple(Planned(c.id, c.row, c.image.label, c.image.index) for c in cells)


def shared_name(root: Path, name: str, matrix: Path) -> str | None:
    """Another matrix file whose runs share this sweep's `name:` folder, or None."""
    for run in reversed(runs_of(root.parent, (SWEEP,), name)):
        if run != root and not made_from(run, matrix):
            return str(path_shown(Path(matrix_named(run))))
    return None


class PlainProgress:
    """`harness: TEXT` on stderr, one line per event; nothing with `quiet`."""

    def __init__(self, quiet: bool = False, stream: TextIO | None = None):
        self.quiet = quiet
        self.stream = stream

    def __call__(self, text: str) -> None:
        """One event, wrapped at the terminal's width or COLUMNS, else as is."""
        if self.quiet:
            return

        stream = self.stream or sys.stderr
        width = console_width(stream)
        line = f"harness: {text}"
        print("\n".join(wrap(line, width)) if width else line, file=stream, flush=True)

    def cell(self, cell: Cell, event: str, result: CellResult | None) -> None:
        """Structured cell events; the plain lines already say everything."""

    def close(self) -> None:
        """Nothing to tear down."""


def progress_for(quiet: bool, samples: Callable[[str], Path], stream: TextIO | None = None
                 ) -> PlainProgress | LiveProgress:
    """The progress callback for this terminal: live on a TTY, plain lines otherwise."""
    out = stream or sys.stderr
    if quiet or not out.isatty() or os.environ.get("TERM") == "dumb":
        return PlainProgress(quiet, stream)
    # lazy: rich's live display, on a TTY alone
    from harness.report.live import LiveProgress

    return LiveProgress(samples)
