"""`harness sweep`'s work: the cells run and decided (then explained, searched, with the
options that ask), every report written, the exit code; `cli.sweep` parses and prints,
`harness.sweep` (`api.matrix`) calls the same functions."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harness import report as reports
from harness.analysis.rules import BUSY_HOST, TIMEOUT_BUSY, UNSETTLED
from harness.app.command import exit_code as exit_code  # the sweep's exit, read here too
from harness.app.command import hold
from harness.app.sweepoptions import SweepOptions
from harness.orchestrator import Sweep, prefetch_analysis
from harness.preflight import check_lengths, compile_scenarios, floor_caps
from harness.report.plain import progress_for
from harness.result.model import Planned
from harness.runtimes import Engines
from harness.signals import interruptible
from harness.store import RunStore
from harness.store.gate import kept_plan
from harness.store.runs import SWEEP, begun_of, made_from, matrix_named, runs_of
from harness.store.runs import shown as path_shown

if TYPE_CHECKING:
    from harness.matrixfile.model import Cell, Matrix
    from harness.orchestrator import SweepOutcome
    from harness.report import Report
    from harness.result.codec import JSON
    from harness.runtimes.base import Progress


def preflight(cells: list[Cell], matrix: Matrix, iterations: int | None) -> list[Cell]:
    """Before any container: a scenario's syntax error is exit 2 with file:line; a run
    too short to ever decide is refused where --iterations asked for it (`iterations`),
    else said (a smoke or OOM run is the author's choice); an --iterations that can
    decide but needs longer is raised for a run with a time budget (its cap), and said.
    Returns the cells as they will run.

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
    """What `sweep_and_report` refuses of the matrix before any engine is asked
    (`Engines.for_matrix`: images of another runtime's kind, a setting its runtime
    cannot honour): `sweep --list` refuses it alike, with the same error and exit code.

    Raises:
        InputError: as `Engines.for_matrix` does.
    """
    Engines.for_matrix(matrix, asked.runtime or matrix.runtime, asked.docker_host)


def sweep_and_report(asked: SweepOptions, matrix: Matrix, cells: list[Cell],
                     progress: Progress) -> tuple[Report, Path, list[Path]]:
    """The cells swept (then explained, with --explain) and every report file written:
    the report model, the results directory and the files written there.

    Raises:
        EngineUnavailable: no engine or GPU (exit 3, before a results directory exists).
    """
    engines = Engines.for_matrix(matrix, asked.runtime or matrix.runtime, asked.docker_host)
    runtime = engines.default
    resume: bool | Path = Path(asked.resume) if isinstance(asked.resume, str) else asked.resume
    started = time.time()
    # no engine / no GPU: exit 3 before any results directory exists
    engines.start(cells, progress)
    with interruptible():
        store = RunStore.open(asked.out, matrix.name, resume, asked.matrix, started)
        # Imports NumPy and the reporters while the first cell runs; after every other
        # import of this command, so the two threads never import the same modules at once.
        prefetch = hold(prefetch_analysis(*REPORTERS, then=compile_report_template))
        with engines.stopped(store.unlock):
            store.write("matrix.yaml", asked.matrix.read_text(encoding="utf-8"))
            planned = plan_of(cells)
            # Absolute: explain and report find it from any directory.
            # A resumed run keeps its first start (its directory's name) and says when
            # it was continued.
            store.mark(SWEEP, matrix.name, str(asked.matrix.resolve()),
                       kept_plan(store.root, matrix, planned) if resume else planned,
                       begun_of(store.root) if resume else started,
                       started if resume else None)
            progress(f"{len(cells)} cell{'' if len(cells) == 1 else 's'}, runtime "
                     f"{runtime.name}, results in {store.root}")
            if (other := shared_name(store.root, matrix.name, asked.matrix)) is not None:
                progress(f"note: {path_shown(store.root.parent)} also holds runs of "
                         f"{other}, another matrix file named {matrix.name!r}: report, "
                         "history and compare read them as this one's runs\n  fix: "
                         f"give {asked.matrix.name} a name: of its own")
            live = progress_for(asked.quiet, store.samples_path)
            before = prior_meta(store.root) if resume else None
            try:
                outcome = Sweep(matrix, runtime, store, live, engines.by_host).run(
                    cells, bool(resume))
                if asked.between or asked.explain or asked.find_cause:
                    # lazy: the plans only an option runs load after the cells ran
                    from harness.app import sweepend

                    if asked.between and not asked.find_cause:  # --find-cause does it
                        sweepend.culprit_after(matrix, runtime, engines.by_host, store.root,
                                               live, outcome.results, planned, cells)
                    if asked.explain or asked.find_cause:   # their answers go into the reports
                        # --find-cause's steps go to the sweep's own display (its lines above)
                        sweepend.after_sweep(asked, matrix, engines, store,
                                             live if asked.find_cause else progress,
                                             outcome.results, planned)
            finally:
                live.close()
            prefetch.join()   # the reporters were imported while the cells ran
            report, paths = reported(outcome, planned, store, {
                "matrix": str(asked.matrix), "runtime": runtime.name, "started": started,
                "baseline": matrix.baseline}, matrix.name, before)
    return report, store.root, paths


def prior_meta(root: Path) -> dict[str, JSON]:
    """What the earlier part of a resumed sweep said of itself (its results.json's meta:
    started, seconds, ran, reused); {} where it wrote none (stopped before its end)."""
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
    """The sweep's report model (its meta: `meta` and how the cells went), every report
    file written into the results directory. A resumed one (`before`: its earlier part's
    meta, `prior_meta`) is the whole sweep's: started at its first start, resumed now,
    its seconds the parts' sum, the cells its earlier parts finished counted as ran (this
    part reused them from its own directory), not as reused from elsewhere."""
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
    """The command that decides what is not decided: missing cells are run by --resume
    (it reuses every finished one); undecided cells, whose results --resume would
    reuse, by a longer run, unless a busy host alone left them so; a whole script runs
    once, whatever --iterations says."""
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
    """Another matrix file whose runs share `name:`'s folder with this sweep's `root`
    (a copy of a matrix changed, its name kept), as a command line would name it."""
    for run in reversed(runs_of(root.parent, (SWEEP,), name)):
        if run != root and not made_from(run, matrix):
            return str(path_shown(Path(matrix_named(run))))
    return None

