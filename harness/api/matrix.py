"""`harness.sweep`: a matrix run as `harness sweep` runs it, reports included."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from harness import matrixfile
from harness.api.checked import Checked, Swept
from harness.app.command import printer
from harness.errors import InputError, SpecError
from harness.matrixfile.model import RUNTIMES
from harness.stages.options import SweepOptions, apply_overrides
from harness.sweeping.course import exit_code, preflight, sweep_and_report


def sweep(matrix: str | os.PathLike[str] | Mapping[str, Any], *, out: str | os.PathLike[str]
          = "reports", select: str | None = None, budget: str | float | None = None,
          iterations: int | None = None, runtime: str | None = None, resume: bool = False,
          progress: bool = False) -> Swept:
    """Run a matrix as `harness sweep MATRIX` does, without printing the table.

    Args:
        matrix: A matrix file, or its content as a dict (paths from the cwd; not resumable).
        out, progress: The reports folder (`--out`): OUT/NAME/TIMESTAMP/; lines on stderr.
        select, budget, iterations, runtime, resume: As their flags (select: `-k`).

    Raises: InputError: a bad matrix or argument (with the file, key, line and a fix);
    EnvironmentUnavailable: no engine, GPU or interpreter for the cells.
    """
    if isinstance(matrix, Mapping):
        with tempfile.TemporaryDirectory(prefix="harness-matrix-") as tmp:
            path = Path(tmp) / f"{matrix.get('name') or 'matrix'}.yaml"
            path.write_text(_dumped(matrix), encoding="utf-8")
            try:
                return _sweep_file(path, out, select, budget, iterations, runtime, resume,
                                   progress)
            except SpecError as exc:     # said of the dict, not of its temporary file
                if Path(exc.file) != path:
                    raise
                fix = f"\n  fix: {exc.fix}" if exc.fix else ""
                raise InputError(f"harness.sweep: the matrix dict: {exc.path or '(top)'}: "
                                 f"{exc.problem}{fix}") from None
    return _sweep_file(Path(matrix), out, select, budget, iterations, runtime, resume,
                       progress)


def _dumped(matrix: Mapping[str, Any]) -> str:
    """The dict as YAML, its relative scenario paths made absolute from here."""
    doc = dict(matrix)
    axes = doc.get("matrix")
    if isinstance(axes, Mapping) and isinstance(axes.get("scenario"), list):
        def absolute(item: Any) -> Any:
            if isinstance(item, str):
                return str(Path(item).absolute())
            if isinstance(item, Mapping) and isinstance(item.get("script"), str):
                return {**item, "script": str(Path(item["script"]).absolute())}
            return item

        doc["matrix"] = {**axes, "scenario": [absolute(s) for s in axes["scenario"]]}
    try:
        return yaml.safe_dump(doc, sort_keys=False)
    except yaml.YAMLError as exc:
        raise InputError(f"harness.sweep: the matrix dict is not plain data: {exc}\n  fix: "
                         "strings, numbers, lists and mappings only, as in a matrix file"
                         ) from None


def _sweep_file(path: Path, out: str | os.PathLike[str], select: str | None,
                budget: str | float | None, iterations: int | None, runtime: str | None,
                resume: bool, progress: bool) -> Swept:
    if iterations is not None and (isinstance(iterations, bool) or
                                   not isinstance(iterations, int) or iterations < 1):
        raise InputError(f"harness.sweep: iterations={iterations!r}: a whole number >= 1 "
                         "(the measured calls of each cell)\n  fix: e.g. iterations=300")
    if runtime is not None and runtime not in RUNTIMES:
        raise InputError(f"harness.sweep: runtime={runtime!r}: not a runtime\n  fix: one of "
                         f"{', '.join(RUNTIMES)}")
    asked = SweepOptions(path, Path(out), resume, runtime, quiet=not progress,
                         iterations=iterations, budget=budget)
    m = matrixfile.load(path)
    cells = apply_overrides(matrixfile.select(m.cells, select), iterations, None, budget)
    cells = preflight(cells, m, iterations)
    report, root, _ = sweep_and_report(asked, m, cells, printer(not progress))
    return Swept(report, root, exit_code(report),
                 {k: Checked(r, root) for k, r in report.results.items()})
