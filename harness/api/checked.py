"""What `harness.check` and `harness.sweep` return: the typed results, in words."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.analysis.decision import pooled_text
from harness.analysis.kinds import BAD, GOOD
from harness.api.scenario import SCENARIO
from harness.result.model import cell_numbers, missed_rate, missed_words
from harness.thresholds import host_busy

if TYPE_CHECKING:
    from harness.report.model import Report
    from harness.result.model import CellResult


@dataclass(frozen=True)
class Checked:
    """One function's run as a cell: the typed result and its verdict in words.

    Attributes:
        result: The cell's result, as result.json stores it.
        root: The results directory kept (`check(..., out=DIR)`), else None.
        where: For a leak, the lines that grew under a short tracemalloc run, or why none.
        took: (wall s, the run's own s) of its measured calls, its readings counted as its
            own (`host_stretched`: a much larger first is the host's other work).
        wall_s, load: The whole check's seconds; the host's 1-minute load per CPU at the end.
    """

    result: CellResult
    root: Path | None = None
    where: tuple[str, ...] = ()
    took: tuple[float, float] | None = None
    wall_s: float = 0.0
    load: float | None = None

    @property
    def busy(self) -> str:
        """What the host's other work did to the check (`thresholds.host_busy`); else ""."""
        if self.took is None:
            return ""
        wall, own = self.took
        if host_busy(wall, own):
            return f"host busy: {own:.1f} s of its calls' own time took {wall:.1f} s"
        if self.load is not None and self.load > 1 and host_busy(self.wall_s, 2 * own):
            return (f"host busy (load {self.load:.1f} a CPU): {own:.1f} s of its calls' own "
                    f"time, {self.wall_s:.1f} s in all")
        return ""

    @property
    def id(self) -> str:
        """The cell's id (`image.gpu.scenario`), its key in `Swept.cells`."""
        return self.result.id

    @property
    def verdict(self) -> str:
        return self.result.verdict

    @property
    def reason(self) -> str:
        return self.result.reason

    @property
    def rule(self) -> str:
        """The rule of `harness.analysis.rules` that decided it (`harness report --why`)."""
        return self.result.rule

    @property
    def ok(self) -> bool:
        """A good verdict (ok, plateau: nothing to fix)."""
        return self.result.verdict in GOOD

    @property
    def bad(self) -> bool:
        """A finding (leak, slowdown, regression, crash, oom, timeout)."""
        return self.result.verdict in BAD

    @property
    def floor(self) -> float | None:
        """For a good verdict, the smallest steady leak it could miss (B/call); else None."""
        return missed_rate(self.result)

    @property
    def figures(self) -> str:
        """The cell's key numbers, as the sweep's table says them."""
        return cell_numbers(self.result)

    @property
    def traceback(self) -> str:
        """Where the step raised (a `crash`), from its own frames on; else ""."""
        error = self.result.end.error
        if error is None or not error.traceback:
            return ""
        lines = error.traceback.rstrip().splitlines()
        mine = [i for i, line in enumerate(lines) if SCENARIO in line]
        start = mine[-1] + 2 if mine else 0
        return "\n".join(["Traceback (most recent call last):", *lines[start:]]
                         if start else lines)

    def __str__(self) -> str:
        """"leak (rule leak): heap grows +1.1 KiB/call ..."; a good one ends with its floor."""
        text = f"{self.verdict} (rule {self.rule or '-'}): {self.reason}"
        vs = self.result.vs_baseline
        more = [missed_words(self.result)]
        if vs is not None and vs.confirmation is not None:
            # A verdict the rounds decided says them in its reason already: once.
            if vs.confirmation.reason not in text:
                more.append(f"vs {vs.baseline}: {vs.confirmation.reason}")
        elif vs is not None and vs.steps is not None and vs.baseline not in text:
            more.append(pooled_text(vs.steps, vs.baseline))
        return "; ".join([text, *(m for m in more if m and m not in text)])


@dataclass(frozen=True)
class Swept:
    """A matrix swept as `harness sweep` does it.

    Attributes:
        report, root: The report model every renderer reads; the results directory.
        exit_code, cells: `harness sweep`'s exit code; each `Checked` by id (`bad`: bad ids).
    """

    report: Report
    root: Path
    exit_code: int
    cells: dict[str, Checked] = field(default_factory=dict)

    @property
    def results(self) -> list[CellResult]:
        return list(self.report.results.values())

    @property
    def bad(self) -> list[str]:
        return list(self.report.bad_cells)
