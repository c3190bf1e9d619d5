"""What `harness sweep` runs after its cells where an option asks (`--between`'s culprit,
`--explain`, `--find-cause`); imported only then, so their plans load late."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harness.analysis.kinds import BAD, GOOD
from harness.answers.search import pairs, unpaired
from harness.culprit.app import RunsOn, culprit_in_run
from harness.culprit.plan import docker_hybrids
from harness.days.journey import find_causes
from harness.explain import explain_matrix
from harness.runtimes import Engines
from harness.stages.options import SweepOptions, apply_overrides
from harness.stages.orchestrator import Sweep
from harness.store import RunStore

if TYPE_CHECKING:
    from harness.culprit.plan import Maker
    from harness.matrixfile.model import Cell, Matrix
    from harness.result.model import CellResult, Planned
    from harness.runtimes.base import Progress, Runtime


def after_sweep(asked: SweepOptions, matrix: Matrix, engines: Engines, store: RunStore,
                progress: Progress, results: dict[str, CellResult],
                planned: Sequence[Planned]) -> None:
    """`--explain`, or `--find-cause`'s chain (`days.journey`) over the matrix's cells."""
    if not asked.find_cause:
        explain_after(matrix, engines.default, store, progress, engines.by_host, results,
                      planned)
        return

    def hybrids(g: Cell, b: Cell) -> Maker | None:
        """Built on B's host's engine. Raises: EnvironmentUnavailable: it builds none."""
        own = (engines.by_host or {}).get(b.host.label, engines.default)
        client = Engines(own).hybrid_client(asked.runtime or matrix.runtime)
        return None if client is None else docker_hybrids(client, g, b, progress)

    find_causes(Sweep(matrix, engines.default, store, progress, engines.by_host),
                apply_overrides(list(matrix.cells), asked.iterations, asked.warmup,
                                asked.budget), results, planned, hybrids,
                progress)


def explain_after(matrix: Matrix, runtime: Runtime, store: RunStore, progress: Progress,
                  by_host: dict[str, Runtime] | None, results: dict[str, CellResult],
                  planned: Sequence[Planned] = ()) -> None:
    """`--explain`: each row's first bad and last good cell, run again with attribution."""
    todo = pairs(results, planned=planned)   # never across a cell the sweep did not run
    for line in unpaired(results, planned):
        progress(f"explain: {line}")
    if not todo:
        progress("explain: no row has a bad cell; nothing to explain")
        return
    explain_matrix(Sweep(matrix, runtime, store, progress, by_host).ctx, matrix, results, todo,
                   store.root)


def culprit_after(matrix: Matrix, runtime: Runtime, by_host: dict[str, Runtime] | None,
                  root: Path, progress: Progress, results: dict[str, CellResult],
                  planned: Sequence[Planned], cells: Sequence[Cell]) -> None:
    """`harness culprit`'s search in each row where NEW is bad and OLD good."""
    by_id = {c.id: c for c in cells}
    old, new = matrix.images[0].label, matrix.images[1].label
    rows = sorted({c.row for c in cells})
    found = {p.row: p for p in pairs(results, planned=planned)}
    on = RunsOn(matrix, runtime, progress, by_host)
    for row in rows:
        here = {c.image.label: results.get(c.id) for c in cells if c.row == row}
        a, b = here.get(old), here.get(new)
        if a is None or b is None or b.verdict not in BAD:
            continue
        p = found.get(row)
        if a.verdict not in GOOD or p is None or p.good is None or p.cell != b.id:
            progress(f"culprit {row}: not searched: {old} is {a.verdict}, not good (NEW is "
                     "bad, but so is OLD, or OLD told nothing)")
            continue
        progress(f"culprit {row}: {new} is {b.verdict}, {old} {a.verdict}: which package "
                 "change did it")
        out, _ = culprit_in_run(root, on, by_id[p.good], by_id[p.cell], results,
                                said(progress, row))
        progress(f"culprit {row}: {out.sentence()}")


def said(progress: Progress, row: str) -> Progress:
    """The search's lines for `row`, each said as that row's."""
    def say(text: str) -> None:
        progress(f"culprit {row}: {text}")

    return say
