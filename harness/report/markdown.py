"""report.md: GitHub-flavoured, fit for a PR comment or $GITHUB_STEP_SUMMARY."""

from __future__ import annotations

from typing import TextIO

from harness.report.model import Reporter, md

FOLD_AFTER = 8   # pip differences shown inline; more fold into <details>


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


class MarkdownReporter(Reporter):
    def render(self, out: TextIO) -> None:
        r = self.report
        out.write(f"# harness sweep: {md(r.name)}\n\n")
        bad = len(r.bad_cells)
        out.write(f"{plural(len(r.results), 'cell')}, {bad} bad"
                  + (f", {len(r.unavailable_cells)} unavailable" if r.unavailable_cells else "")
                  + ". Plots of every cell: [report.html](report.html).\n\n")
        note = r.incomplete_note()   # a partial or undecided answer says so first
        if note is not None:
            out.write(f"**{md(note)}**\n\n")
        header, body = r.table()
        out.write("| " + " | ".join(md(h) for h in header) + " |\n")
        out.write("|" + "---|" * len(header) + "\n")
        for line in body:
            out.write("| " + " | ".join(md(c) for c in line) + " |\n")
        notes = r.unavailable_notes()
        if notes:
            out.write("\n**Not run** (image or environment unavailable):\n\n")
            for note in notes:
                out.write(f"- {md(note)}\n")
        for row in r.rows:
            out.write(f"\n## {md(row.row)}\n\n{md(row.sentence)}\n")
            if row.diff:
                out.write(f"\n| changed | last good ({md(row.last_good)}) | "
                          f"first bad ({md(row.first_bad)}) |\n|---|---|---|\n")
                main = [d for d in row.diff if not d[0].startswith("pip ")]
                pips = [d for d in row.diff if d[0].startswith("pip ")]
                shown = main + (pips if len(pips) <= FOLD_AFTER else [])
                for what, good, badv in shown:
                    out.write(f"| {md(what)} | {md(good)} | {md(badv)} |\n")
                if len(pips) > FOLD_AFTER:
                    out.write(f"\n<details><summary>{len(pips)} pip packages changed"
                              "</summary>\n\n| package | last good | first bad |\n"
                              "|---|---|---|\n")
                    for what, good, badv in pips:
                        out.write(f"| {md(what[4:])} | {md(good)} | {md(badv)} |\n")
                    out.write("\n</details>\n")
            cause = r.cause_lines(row.row)
            if cause:
                out.write(f"\n**Cause** (`harness sweep --find-cause`): {md(cause[0])}\n\n")
                for text in cause[1:]:
                    out.write(f"- {md(text)}\n")
            culprit = r.culprit_lines(row.row)
            if culprit:
                out.write(f"\n**Culprit** (`harness culprit`): {md(culprit[0])}\n\n")
                for text in culprit[1:]:
                    out.write(f"- {md(text)}\n")
            # the first bad's sites first: what a reader came for, its last good below
            ids = [cid for _, _, cid in row.cells]
            first = [cid for cid in ids if cid in r.explained
                     and r.explained[cid].role == "first bad"]
            for cid in first + [cid for cid in ids if cid not in first]:
                found = r.where_lines(cid)
                if found:
                    ex = r.explained[cid]
                    paired = f", against {md(ex.paired)}" if ex.paired else ""
                    out.write(f"\n**Where** ({md(cid)}, {md(ex.role)}{paired}; "
                              f"`harness explain`, {ex.calls} calls with attribution):\n\n")
                    for text in found:
                        out.write(f"- {md(text)}\n")
            if row.row in r.stale_where:
                out.write(f"\n**Where**: {md(r.stale_where[row.row])}\n")
            out.write("\n| cell | verdict | why |\n|---|---|---|\n")
            for _, verdict, cid in row.cells:
                res = r.results.get(cid)   # None: not run or unreadable (a partial report)
                why = res.reason if res is not None else r.unreadable.get(
                    cid, "no result.json: the sweep did not finish this cell")
                out.write(f"| {md(cid)} | {md(verdict)} | {md(why)} |\n")
