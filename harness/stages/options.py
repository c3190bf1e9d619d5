"""What a sweep is asked (`SweepOptions`), and the lengths asked applied to its cells."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import InputError
from harness.matrixfile.entries import duration_problem, parse_duration
from harness.matrixfile.model import BUDGET_CAP

if TYPE_CHECKING:
    from harness.matrixfile.model import Cell


@dataclass(frozen=True)
class SweepOptions:
    """What a sweep is asked: `harness sweep`'s flags, `harness.sweep`'s arguments.

    Attributes:
        matrix, out: The matrix file (with --between, the one written); the reports folder.
        resume: Continue the newest results directory (True), or the one given.
        runtime, docker_host, quiet: Another runtime and its engine; no progress or display.
        between, explain, find_cause: Then culprits where NEW is bad; where the first bad
            leaks or slows; the whole journey per bad row (`days.journey`).
        iterations, warmup, budget: The lengths asked.
    """

    matrix: Path
    out: Path = Path("reports")
    resume: bool | str = False
    runtime: str | None = None
    docker_host: str | None = None
    quiet: bool = False
    between: bool = False
    explain: bool = False
    find_cause: bool = False
    iterations: int | None = None
    warmup: int | None = None
    budget: str | float | None = None


def apply_overrides(cells: list[Cell], iterations: int | None = None, warmup: int | None = None,
                    budget: str | float | None = None) -> list[Cell]:
    """--iterations, --warmup and --budget over every cell; --iterations bounds every run
    of the cell, re-runs and rounds included.

    Raises:
        InputError: a --budget that is not a duration.
    """
    changes: dict[str, Any] = {
        k: v for k, v in (("iterations", iterations), ("warmup", warmup),
                          ("asked_calls", iterations))
        if v is not None}
    if budget is not None:
        seconds = parse_duration(budget)
        if seconds is None:
            raise InputError(f"--budget {budget}: {duration_problem(budget)}; write e.g. "
                             "20s, 2m or 30")
        cells = [c.with_settings(dataclasses.replace(
            c.settings, budget=seconds, max_iterations=c.settings.max_iterations or BUDGET_CAP))
            for c in cells]
    if not changes:
        return cells
    out = []
    for c in cells:
        settings = dataclasses.replace(c.settings, **changes)
        if iterations is not None and settings.max_iterations is not None:
            # Early-stop mode runs up to max_iterations: that is the length asked for.
            settings = dataclasses.replace(
                settings, max_iterations=iterations,
                min_iterations=min(settings.min_iterations, iterations))
        out.append(c.with_settings(settings))
    return out
