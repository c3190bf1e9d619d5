"""What CI shows of a sweep: report.md (`MarkdownReporter`, for a PR comment or step summary)
and junit.xml (`JunitReporter`, a testcase per cell, its element the kind's `Kind.junit`).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import TextIO

from harness.analysis.kinds import kind
from harness.analysis.records import kib
from harness.report.model import Reporter, md, steps_vs_baseline
from harness.result.model import CellResult

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


# XML 1.0 cannot carry these at all, not even escaped; tracebacks may hold colour codes.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def clean(text: str) -> str:
    """Text without the characters XML 1.0 forbids (each becomes U+FFFD)."""
    return _NOT_XML.sub("\ufffd", text)


def details(res: CellResult) -> str:
    """Every number behind a verdict, one line each, for the failure body."""
    lines = [f"verdict: {res.verdict}: {res.reason}"]
    for name, t in sorted(res.memory.items()):
        lines.append(f"{name}: {t.kind} slope {kib(t.slope, 3)} KiB/call "
                     f"(CI {kib(t.slope_lo, 3)}..{kib(t.slope_hi, 3)}), "
                     f"growth {t.growth / 1024**2:+.2f} MiB, peak "
                     f"{t.peak / 1024**2:.1f} MiB over {t.n} samples")
    steps = res.steps
    if steps is not None:
        lines.append(f"steps: median {steps.median_s * 1e3:.4g} ms, late/early "
                     f"{steps.ratio:.3f}x (p={steps.p_value:.3g})")
    vs = res.vs_baseline
    if vs is not None:
        if vs.steps is not None or vs.confirmation is not None:
            lines.append(f"vs {vs.baseline} steps: {steps_vs_baseline(vs)}")
        if vs.cpu is not None:
            c = vs.cpu
            lines.append(f"vs {vs.baseline} cpu: {c.ratio:.3f}x pooled, p={c.p_value:.3g} "
                         f"({c.direction})")
        if vs.peak_rss is not None:
            lines.append(f"vs {vs.baseline} peak_rss: {vs.peak_rss.ratio:.3f}x "
                         f"({vs.peak_rss.direction})")
    return "\n".join(lines)


class JunitReporter(Reporter):
    def tree(self) -> ET.Element:
        """`<testsuites>` with one `<testsuite>` per row, one `<testcase>` per cell."""
        r = self.report
        top = ET.Element("testsuites", name=f"harness {r.name}")
        totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for row in r.rows:
            suite = ET.SubElement(top, "testsuite", name=row.row)
            counts = dict.fromkeys(totals, 0)
            seconds = 0.0
            for _, verdict, cid in row.cells:
                res = r.results.get(cid)
                if res is None:   # planned, not run or unreadable: no answer is an error
                    counts["tests"] += 1
                    counts["errors"] += 1
                    case = ET.SubElement(suite, "testcase", classname=f"harness.{row.row}",
                                         name=clean(cid), time="0.000")
                    ET.SubElement(case, "error", type=verdict, message=clean(
                        f"{verdict}: " + r.unreadable.get(cid, "no result.json")))
                    continue
                cell_s = res.timings.cell_s
                seconds += cell_s
                case = ET.SubElement(suite, "testcase", classname=f"harness.{row.row}",
                                     name=clean(cid), time=f"{cell_s:.3f}")
                counts["tests"] += 1
                message = f"{verdict}: {res.reason}"
                numbers = r.numbers_of(cid)
                if numbers:
                    message += f" [{numbers}]"
                shown = kind(verdict).junit
                if shown == "failure":
                    counts["failures"] += 1
                    el = ET.SubElement(case, "failure", message=clean(message), type=verdict)
                    el.text = clean(details(res))
                elif shown == "error":
                    counts["errors"] += 1
                    el = ET.SubElement(case, "error", message=clean(message), type=verdict)
                    err = res.end.error
                    el.text = clean(err.traceback if err is not None and err.traceback
                                    else details(res))
                elif shown == "skipped":
                    counts["skipped"] += 1
                    ET.SubElement(case, "skipped", message=clean(message))
                else:
                    ET.SubElement(case, "system-out").text = clean(details(res))
            for key, value in counts.items():
                suite.set(key, str(value))
                totals[key] += value
            suite.set("time", f"{seconds:.3f}")
        for key, value in totals.items():
            top.set(key, str(value))
        return top

    def render(self, out: TextIO) -> None:
        top = self.tree()
        ET.indent(top)
        out.write('<?xml version="1.0" encoding="utf-8"?>\n')
        # ET.tostring(top, encoding="unicode"), written as it is made, not held whole.
        ET.ElementTree(top).write(out, encoding="unicode")
        out.write("\n")
