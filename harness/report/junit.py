"""junit.xml: one testcase per cell, so CI shows a sweep as tests.

Each verdict kind's element is its `Kind.junit` (harness.analysis.kinds): leak,
slowdown, regression and oom are `<failure>`s (the code under test misbehaved) with the
numbers in the message; crash and timeout are `<error>`s (it did not finish), and
unavailable too (it could not run); not-applicable, ambiguous and suspected (an
unconfirmed change) are `<skipped>` with the reason, since none says the code is wrong;
only ok and plateau pass. ElementTree does the XML escaping.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import TextIO

from harness.analysis.kinds import kind
from harness.analysis.trends import kib
from harness.report.model import Reporter, steps_vs_baseline
from harness.result.model import CellResult

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
        # What ET.tostring(top, encoding="unicode") returns, written as it is made: the
        # text of 10,000 cells is 8 MB, held twice more by that and by adding the "\n".
        ET.ElementTree(top).write(out, encoding="unicode")
        out.write("\n")
