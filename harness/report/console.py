"""The terminal table; colour only on a TTY."""

from __future__ import annotations

from typing import TextIO

from tabulate import tabulate

from harness.report.model import Report

COLOURS = {"leak": "31", "slowdown": "33", "regression": "35", "oom": "31", "timeout": "31",
           "crash": "31", "ok": "32", "plateau": "36", "ambiguous": "90",
           "not-applicable": "90", "suspected": "35"}


class ConsoleReporter:
    def __init__(self, report: Report):
        self.report = report

    @classmethod
    def from_results(cls, report: Report) -> ConsoleReporter:
        return cls(report)

    def render(self, out: TextIO, colour: bool | None = None) -> None:
        if colour is None:
            colour = out.isatty()
        header, body = self.report.table()
        if colour:
            body = [[_paint(c) for c in row] for row in body]
        out.write(tabulate(body, headers=header, tablefmt="simple") + "\n")
        for row in self.report.rows:
            if row.first_bad:
                out.write(f"\n{row.row}: {row.sentence}\n")
                for what, good, bad in row.diff[:15]:
                    out.write(f"  {what}: {good} -> {bad}\n")
                if len(row.diff) > 15:
                    out.write(f"  ... {len(row.diff) - 15} more differences in report.md\n")


def _paint(text: str) -> str:
    word = text.split(" ", 1)[0]
    code = COLOURS.get(word)
    return f"\x1b[{code}m{text}\x1b[0m" if code else text
