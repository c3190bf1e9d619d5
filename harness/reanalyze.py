"""`harness report DIR --reanalyze [--set analysis.KEY=VALUE] [--write]`: every cell of a
recorded run decided again from its `samples.jsonl` with today's code (an upgrade, other
thresholds); with --write kept as a new directory beside the run, which is never written.
What cannot be had again (rounds, an unavailable image, a GPU precheck) is kept as
recorded; the early stop is replayed. Deciding (`reanalyze`) writes nothing.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.analysis.decision import CellFacts, CellVerdict, decide
from harness.analysis.kinds import COMPARED_WITH, NOT_MEASURED, SLOWDOWN, UNREADABLE
from harness.analysis.records import Baseline
from harness.analysis.sequential import replay_live
from harness.errors import StoreError
from harness.matrixfile.load import analysis_of
from harness.matrixfile.model import row_baselines
from harness.protocol.ingest import no_samples
from harness.protocol.series import Series
from harness.report import Report, write_all
from harness.result.build import run_outcome
from harness.result.codec import JSON
from harness.result.model import CellResult, Planned
from harness.stages.context import RoundsPlan
from harness.stages.settle import against_baseline, with_comparison, with_rounds, with_verdict
from harness.store import RunStore, SeriesCache
from harness.store.runs import REANALYZED, started_of
from harness.thresholds import AnalysisConfig

__all__ = ["RULES", "Changed", "Redecided", "changed_by", "reanalyze", "redecide", "write_beside"]

# Verdicts set before anything ran: there are no samples to decide them from again.
KEPT = NOT_MEASURED


@dataclass(frozen=True)
class Changed:
    """A cell whose verdict the new analysis set differently."""

    cell: str
    before: str
    after: str
    reason: str
    by: str = ""        # what changed it: the --set overrides, or harness's rules


RULES = "harness's rules: its analysis decides these samples otherwise than when swept"


def changed_by(changed: list[Changed], plain: Mapping[str, CellResult], overrides: str
               ) -> list[Changed]:
    """Each change with what made it: the --set `overrides` where the cell decided without
    them (`plain`) keeps its recorded verdict, else harness's rules; a cut-short file says
    so in its reason already."""
    out = []
    for c in changed:
        if c.after == UNREADABLE:
            out.append(c)
            continue
        kept = c.cell in plain and plain[c.cell].verdict == c.before
        out.append(dataclasses.replace(c, by=overrides if overrides and kept else RULES))
    return out


def within(cfg: AnalysisConfig, res: CellResult, series: Series) -> CellVerdict:
    """The cell's within-run verdict from its recorded samples. Its earlier runs' samples
    are gone: a slowdown stands where the sweep let it (`slowdown`), as recorded."""
    low, top = res.settings.get("min_iterations"), res.settings.get("max_iterations")
    live = (replay_live(cfg, series, low, top)
            if isinstance(low, int) and isinstance(top, int) else None)
    budget = res.settings.get("budget")
    return decide(CellFacts(cfg, series, run_outcome(res), res.gpu.value not in ("", "none"),
                            live, precheck=precheck_of(res),
                            again=res.settings.get("asked_calls") is None,
                            replicated=res.verdict == SLOWDOWN,
                            budget=float(budget) if isinstance(budget, int | float) else None))


def precheck_of(res: CellResult) -> tuple[str, str] | None:
    """The GPU precheck's finding as the result kept it, or None."""
    kind, _, why = (res.facts.gpu_check if res.facts is not None else "").partition(": ")
    return (kind, why) if why else None


def cut_short(res: CellResult, series: Series) -> str | None:
    """Why the samples file no longer holds the run the sweep decided (its stored result
    has an end record the file lacks: the tail was lost), or None."""
    if series.ended or res.end.status is None:
        return None
    kept = f"{series.measured} measured calls left"
    return (f"samples.jsonl cut short: it ends without the end record the run wrote "
            f"(the stored result has it: status {res.end.status}, {res.end.iterations} "
            f"calls; {kept}), so it cannot be decided again")


def recorded(res: CellResult, cfg: AnalysisConfig) -> Baseline | None:
    """The comparison with its row's baseline as the sweep made it, as facts."""
    vs = res.vs_baseline
    if vs is None:
        return None
    rounds = res.settings.get("rounds")
    return Baseline(vs.baseline, vs.steps, vs.peak_rss, vs.cpu,
                    busy=cfg.recheck_share if vs.direction == "~" else 0.0,
                    confirmation=vs.confirmation,
                    rounds=rounds if isinstance(rounds, int) else 0)


def reanalyze(results: Mapping[str, CellResult], series: SeriesCache, cfg: AnalysisConfig,
              baseline: str | None = None) -> tuple[dict[str, CellResult], list[Changed]]:
    """Every cell decided again from its recorded `series` (against the `baseline` label, if
    any), and the cells whose verdict changed: a cut-short cell becomes `unreadable`; a
    cut-short baseline's comparison stays as recorded.
    """
    decided: dict[str, tuple[CellResult, CellVerdict | None]] = {}
    cut: dict[str, str] = {}
    for cell_id, res in results.items():
        found = series(cell_id)
        why = cut_short(res, found) if found is not None and res.verdict not in KEPT \
            else None
        if why is not None:
            cut[cell_id] = why
        elif res.verdict in KEPT or found is None:
            decided[cell_id] = (res, None)
        else:
            mine = within(cfg, res, found)
            decided[cell_id] = (with_verdict(res, mine), mine)
    bases = row_baselines(results.values(), baseline)
    out: dict[str, CellResult] = {}
    for cell_id, (res, verdict) in decided.items():
        base_id = bases[cell_id]
        if base_id in cut:
            # The comparison cannot be made again: the recorded one stands.
            out[cell_id] = (res if verdict is None else
                            with_comparison(cfg, res, verdict, recorded(results[cell_id], cfg)))
            continue
        base_res = decided[base_id][0]
        if verdict is not None and base_id != cell_id and (
                base_res.verdict in COMPARED_WITH):
            # Rounds cannot run again: the recorded ones stand, from the stored result.
            stored = results[cell_id].vs_baseline
            old = stored.confirmation if stored is not None else None
            rounds = res.settings.get("rounds")
            compared = against_baseline(cfg, res, verdict, series(base_id) or no_samples(),
                                        series(cell_id) or no_samples(),
                                        base_res.image.label,
                                        rounds if isinstance(rounds, int) else 0)
            res = (with_rounds(cfg, compared, old) if isinstance(compared, RoundsPlan)
                   else compared)
        out[cell_id] = res
    changed = [Changed(i, results[i].verdict, r.verdict, r.reason)
               for i, r in out.items() if r.verdict != results[i].verdict]
    changed += [Changed(i, results[i].verdict, UNREADABLE, why) for i, why in cut.items()]

    def by_cell(c: Changed) -> str:
        return c.cell

    return out, sorted(changed, key=by_cell)


@dataclass(frozen=True)
class Redecided:
    """A recorded run decided again: its report, the changed cells (and by what), its plan
    with the cut-short cells, the --set it was decided with."""

    report: Report
    changed: list[Changed]
    planned: list[Planned]
    analysis_set: list[str]


def redecide(root: Path, recorded: Report, overrides: Sequence[str] = (),
              outdated: Collection[str] = ()) -> Redecided:
    """Every cell of the run in `root` decided again, with `overrides` (--set) over what
    the run was decided with."""
    # A --write copy starts from the --set it records, so an untouched copy gives back
    # its verdicts.
    kept = recorded.meta.get("analysis_set")
    before = [str(x) for x in kept] if isinstance(kept, list) else []
    cfg = analysis_of(root / "matrix.yaml", [*before, *overrides])
    base = recorded.meta.get("baseline")
    results, changed = reanalyze(recorded.results, SeriesCache(root), cfg,
                                 base if isinstance(base, str) else None)
    plain = results
    if overrides and changed:
        plain, _ = reanalyze(recorded.results, SeriesCache(root),
                             analysis_of(root / "matrix.yaml", before),
                             base if isinstance(base, str) else None)
    changed = changed_by(changed, plain, "--set " + " --set ".join(overrides)
                         if overrides else "")
    # A cut-short cell is named as missing; no first bad is named across it.
    cut = {c.cell: c.reason for c in changed if c.after == UNREADABLE}
    planned = list(recorded.planned) + [
        Planned(cid, r.row, r.image.label, r.image.index)
        for cid, r in recorded.results.items()
        if cid in cut and cid not in {p.id for p in recorded.planned}]
    report = Report.from_results(recorded.name, results, recorded.meta, root,
                                 planned=planned, unreadable={**recorded.unreadable, **cut},
                                 outdated=outdated)
    return Redecided(report, changed, planned, [*before, *overrides])

def write_beside(run_dir: Path, recorded: Report, report: Report,
                 planned: list[Planned], analysis_set: list[str]) -> Path:
    """`--reanalyze --write`: the re-decided run as a new directory beside `run_dir`,
    recording its --set (`analysis_set` in results.json's meta).

    Raises:
        StoreError: the new directory cannot be written.
    """
    out = beside(run_dir)
    started = started_of(run_dir)   # the copy is of cells that ran then, not now
    store = RunStore(out)
    copy_run(run_dir, out)
    matrix = recorded.meta.get("matrix")
    # The copy's plan names what it lacks too (a cut-short cell has no result).
    store.mark(REANALYZED, recorded.name, matrix if isinstance(matrix, str) else "",
               tuple(planned), started)
    for res in report.results.values():
        store.write_cell(res)
    meta: dict[str, JSON] = {**report.meta, "analysis_set": list(analysis_set)}
    write_all(store, dataclasses.replace(report, root=None, meta=meta))
    return out


def beside(run_dir: Path) -> Path:
    """A new directory next to `run_dir` for its re-decided copy."""
    n = 1
    while True:
        out = run_dir.with_name(run_dir.name + "-reanalyzed" + (f"-{n}" if n > 1 else ""))
        if not out.exists():
            return out
        n += 1


def copy_run(src: Path, dst: Path) -> None:
    """What a run left, but its results and reports: cells' samples and logs, the matrix.

    Raises:
        StoreError: the new directory cannot be written.
    """

    try:
        dst.mkdir(parents=True)
        for name in ("matrix.yaml",):
            if (src / name).is_file():
                shutil.copy2(src / name, dst / name)
        for cell in sorted((src / "cells").iterdir()):
            if cell.is_dir():
                shutil.copytree(cell, dst / "cells" / cell.name,
                                ignore=shutil.ignore_patterns("result.json", "stop"))
    except OSError as exc:
        raise StoreError(f"cannot write {dst}: {exc}\n  fix: pass a directory you can "
                         "write beside, or run without --write") from exc
