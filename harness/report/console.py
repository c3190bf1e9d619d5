"""The terminal table: fits the terminal's width; colour only on a TTY without NO_COLOR."""

from __future__ import annotations

import os
from typing import TextIO

from harness.analysis.kinds import IN_DOUBT
from harness.answers.search import RowAnswer
from harness.report.grid import (
    ANSI,
    DETAILS,
    Grid,
    colour_of,
    conclusions,
    console_width,
    runs,
    wrap,
)
from harness.report.model import Reporter


class ConsoleReporter(Reporter):
    _runs = False       # the grid was said as runs, a block per answer (`grid.runs`)

    def render(self, out: TextIO, colour: bool | None = None, width: int | None = None,
               details: bool = False) -> None:
        """The table and the answers.

        Where a width is known (terminal, `width`, `COLUMNS`) everything fits it: the table
        where full words fit, else a grid of tokens (`harness.report.grid`) with answers
        grouped and full words only for cells that need them. Elsewhere one plain line per
        row, for logs and grep. Colour only on a terminal and never with NO_COLOR."""
        if colour is None:
            colour = out.isatty() and not os.environ.get("NO_COLOR")
        width = console_width(out, width)
        gridded = False
        if width is not None:
            gridded = self._fitted(out, width, colour)
        else:
            header, body = self.report.table()
            if colour:
                body = [[row[0], *map(_paint, row[1:-1], said), row[-1]]
                        for row, said in zip(body, self.report.table_verdicts(), strict=True)]
            # lazy: tabulate (with wcwidth, ~30 ms), for the plain table alone
            from tabulate import tabulate

            out.write(tabulate(body, headers=header, tablefmt="simple") + "\n")

        def say(text: str, indent: str = "") -> None:
            lines = wrap(text, width, indent) if width is not None else [indent + text]
            out.write("".join(line + "\n" for line in lines))

        notes = self.report.unavailable_notes()
        if notes:
            say(f"\nnot run ({len(self.report.unavailable_cells)} unavailable "
                f"cell{'s' if len(self.report.unavailable_cells) != 1 else ''}):")
            for note in notes:
                say(note, "  ")
        crashed = list(self.report.crash_frames().items())
        for cid, lines in crashed[: None if details or not gridded else DETAILS]:
            say(f"\n{cid}: {self.report.results[cid].reason}")
            for line in lines:
                say(line, "  ")
        if gridded:
            self._answers(out, width or 80, details)
        elif width is not None and _repeated(answered := [
                row for row in self.report.rows if row.first_bad or row.scenario_error]):
            # Rows with the same answer said once, the rows named.
            out.write("\n" + "".join(f"{line}\n" for line in
                                      conclusions(answered, width, named=True)))
        else:
            for row in self.report.rows:
                if row.first_bad or row.scenario_error:
                    say(f"\n{row.row}: {row.sentence}")
                    for what, good, bad in row.diff[:15]:
                        say(f"{what}: {good} -> {bad}", "  ")
                    if len(row.diff) > 15:
                        say(f"... {len(row.diff) - 15} more differences in report.md", "  ")
        for row in self.report.rows:
            cause = self.report.cause_lines(row.row)
            if cause:
                say(f"\ncause, {row.row}: {cause[0]}")
            culprit = self.report.culprit_lines(row.row)
            if culprit and not cause:
                say(f"\nculprit, {row.row}: {culprit[0]}")
        for row in self.report.rows:
            for _, _, cid in row.cells:
                found = self.report.where_lines(cid)
                if found and self.report.explained[cid].role in ("first bad", "cell"):
                    say(f"\nwhere, {cid} ({self.report.explained[cid].role}):")
                    for text in found[:12]:
                        say(text, "  ")
            if row.row in self.report.stale_where:
                say(f"\nwhere, {row.row}: {self.report.stale_where[row.row]}")

    def _answers(self, out: TextIO, width: int, details: bool) -> None:
        """Below the grid: the answers grouped, then up to DETAILS cells in words."""
        r = self.report
        if not self._runs:      # the runs said each answer already
            out.write("\n" + "".join(f"{line}\n" for line in conclusions(r.rows, width)))
        firsts = [cid for row in r.rows for label, _, cid in row.cells
                  if label == row.first_bad]
        if details:
            said = [cid for row in r.rows for _, _, cid in row.cells if cid in r.results]
        else:
            doubt = [cid for cid, res in sorted(r.results.items())
                     if res.verdict in IN_DOUBT]
            said = []
            for cid in (*firsts, *doubt, *r.bad_cells):
                if cid not in said:
                    said.append(cid)
        if not said:
            return
        shown = said if details else said[:DETAILS]
        out.write("\ncells in words" + ("" if details else
                                          " (first bad, suspected, undecided, bad)") + ":\n")
        for cid in shown:
            res = r.results.get(cid)
            if res is not None:
                out.write("".join(f"{line}\n" for line in wrap(
                    f"{cid}: {r.text_of(cid)}", width, "  ")))
        if len(said) > len(shown):
            out.write("".join(f"{line}\n" for line in wrap(
                f"... {len(said) - len(shown)} more: --details, or report.md", width, "  ")))

    def render_where(self, out: TextIO, cells: list[str]) -> None:
        """`harness explain`'s answer per explained cell: the diff and notes."""
        r = self.report
        for cid in cells:
            ex = r.explained.get(cid)
            if ex is None:
                out.write(f"{cid}: not explained (its attributed run failed)\n\n")
                continue
            res = r.results.get(cid)
            head = f"{cid}: {res.verdict} ({res.reason})" if res is not None else cid
            out.write(f"{head}\n  where ({ex.role}"
                      + (f", against {ex.paired}" if ex.paired else "")
                      + f"; {ex.calls} calls with --attribute {','.join(ex.kinds)}):\n")
            for text in r.where_lines(cid):
                out.write(f"  {text}\n")
            paired = r.explained.get(ex.paired) if ex.paired else None
            if paired is not None:
                out.write(f"  {paired.cell} ({paired.role}), its own run:\n")
                for text in (*paired.summary, *paired.notes):
                    out.write(f"    {text}\n")
            out.write("\n")

    def _fitted(self, out: TextIO, width: int, colour: bool) -> bool:
        """The table where full words fit, else the grid; True for the grid."""
        if self.report.large:    # a block per answer, each pattern of rows a line
            grid = Grid(self.report.images, self.report.rows, self.report.results, width,
                        colour)
            lines = runs(self.report.rows, self.report.images, self.report.results, width)
            out.write("".join(f"{line}\n" for line in [*lines, "", *grid.legend()]))
            self._runs = True
            return True
        # lazy: rich, for a table fitted to a known width alone
        from harness.report.fitted import fitted_table

        return fitted_table(self.report, out, width, colour)


def _repeated(rows: list[RowAnswer]) -> bool:
    """Whether two of the rows give the same answer (first bad and differences)."""
    seen = [(row.sentence, tuple(row.diff)) for row in rows]
    return len(set(seen)) < len(seen)


def _paint(text: str, verdict: str) -> str:
    named = colour_of(verdict)
    return f"\x1b[{ANSI[named]}m{text}\x1b[0m" if named else text

