"""report.md: GitHub-flavoured, fit for a PR comment or $GITHUB_STEP_SUMMARY."""

from __future__ import annotations

from typing import TextIO

from harness.report.model import Report


def _md(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")


class MarkdownReporter:
    def __init__(self, report: Report):
        self.report = report

    @classmethod
    def from_results(cls, report: Report) -> MarkdownReporter:
        return cls(report)

    def render(self, out: TextIO) -> None:
        r = self.report
        out.write(f"# harness sweep: {_md(r.name)}\n\n")
        bad = len(r.bad_cells)
        out.write(f"{len(r.results)} cells, {bad} bad.\n\n")
        header, body = r.table()
        out.write("| " + " | ".join(_md(h) for h in header) + " |\n")
        out.write("|" + "---|" * len(header) + "\n")
        for line in body:
            out.write("| " + " | ".join(_md(c) for c in line) + " |\n")
        notes = r.unavailable_notes()
        if notes:
            out.write("\n**Not run** (image or environment unavailable):\n\n")
            for note in notes:
                out.write(f"- {_md(note)}\n")
        for row in r.rows:
            out.write(f"\n## {_md(row.row)}\n\n{_md(row.sentence)}\n")
            if row.diff:
                out.write(f"\n| changed | last good ({_md(row.last_good)}) | "
                          f"first bad ({_md(row.first_bad)}) |\n|---|---|---|\n")
                for what, good, badv in row.diff:
                    out.write(f"| {_md(what)} | {_md(good)} | {_md(badv)} |\n")
            out.write("\n| cell | verdict | why |\n|---|---|---|\n")
            for _, verdict, cid in row.cells:
                res = r.results[cid]
                out.write(f"| {_md(cid)} | {_md(verdict)} | {_md(res.get('reason', ''))} |\n")
