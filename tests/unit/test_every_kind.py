"""Issue 28 item 3: every verdict kind through every renderer (console, report.md,
report.html, history.html, junit.xml, the issue draft, compare, explain), each reading
the one list in harness/analysis/kinds.py. A kind a renderer cannot show fails here; a
bad kind is never a passing JUnit testcase."""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import get_args

import pytest

from harness.agent.fields import WHERE_KINDS
from harness.analysis.kinds import (
    BAD,
    GOOD,
    KINDS,
    MEMORY,
    TIMED,
    UNDECIDED,
    UNKNOWN,
    Colour,
    Verdict,
    kind,
)
from harness.answers.search import pairs
from harness.compare import compare_hosts
from harness.errors import InputError
from harness.explain import kinds_for
from harness.report import (
    ConsoleReporter,
    HtmlReporter,
    IssueReporter,
    JunitReporter,
    MarkdownReporter,
    Report,
)
from harness.report.grid import ANSI, STYLES
from harness.result.model import CellResult
from tests.resultkit import as_result

VERDICTS: tuple[str, ...] = get_args(Verdict)
ROW = "gpu0.s"


def result(label: str, index: int, verdict: str) -> CellResult:
    return as_result({"id": f"{label}.{ROW}", "row": ROW, "verdict": verdict,
                      "reason": f"why {verdict}", "image": {"label": label, "index": index},
                      "gpu": {"value": "0", "label": "gpu0"},
                      "scenario": {"id": "s", "script": "s.py"},
                      "settings": {"iterations": 100, "warmup": 10}})


def report_of(verdict: str, tmp_path: Path) -> Report:
    """A row: image `good` ok, then image `b` of this kind."""
    (tmp_path / "s.py").write_text("def setup(p):\n    return 1\ndef step(s):\n    pass\n")
    cells = [result("good", 0, "ok"), result("b", 1, verdict)]
    return Report.from_results("m", {c.id: c for c in cells},
                               {"matrix": str(tmp_path / "m.yaml")}, tmp_path)


def history_page(report: Report, tmp_path: Path) -> str:
    """history.html over one sweep's directory holding the report's cells."""
    from harness.history import latest_report, read_history, render_html
    from harness.result.model import Planned
    from harness.store import RunStore
    from harness.store.runs import SWEEP

    store = RunStore(tmp_path / "reports" / "m" / "20261123-000000")
    store.mark(SWEEP, "m", "m.yaml", tuple(Planned(r.id, r.row, r.image.label, r.image.index)
                                           for r in report.results.values()))
    for res in report.results.values():
        store.write_cell(res)
    history = read_history(tmp_path / "reports" / "m")
    out = io.StringIO()
    render_html(history, latest_report(history), out)
    return out.getvalue()


def test_the_list_is_the_verdict_type() -> None:
    assert set(KINDS) == set(VERDICTS)
    assert all(name == k.name for name, k in KINDS.items())
    severities = [k.severity for k in KINDS.values()]
    assert len(set(severities)) == len(severities)       # report.html sorts by it
    assert set(ANSI) == set(STYLES) == set(get_args(Colour))
    with pytest.raises(KeyError):
        kind("not run")


def test_the_classes_the_answers_read() -> None:
    assert {k for k in VERDICTS if kind(k).cls == "bad"} == BAD
    assert {k for k in VERDICTS if kind(k).cls == "good"} == GOOD
    assert {"ambiguous"} == UNDECIDED          # run longer: exit 4
    # the first bad may hide where goodness is unknown, never in a skipped cell
    assert {"ambiguous", "suspected", "unavailable"} <= UNKNOWN
    assert not UNKNOWN & (BAD | GOOD | {"not-applicable"})


@pytest.mark.parametrize("verdict", VERDICTS)
def test_every_kind_through_every_renderer(verdict: str, tmp_path: Path) -> None:
    k = kind(verdict)
    report = report_of(verdict, tmp_path)
    cid = f"b.{ROW}"

    # console: the cell in its kind's colour, plain and fitted
    out = io.StringIO()
    ConsoleReporter(report).render(out, colour=True)
    assert f"\x1b[{ANSI[k.colour]}m{verdict}" in out.getvalue()
    out = io.StringIO()
    ConsoleReporter(report).render(out, colour=False, width=120)
    assert verdict in out.getvalue()

    # report.md: the cell's verdict and reason in its row
    out = io.StringIO()
    MarkdownReporter(report).render(out)
    assert f"| {cid} | {verdict} | why {verdict} |" in out.getvalue().replace("\\", "")

    # report.html: its css class and its place in the sort order
    out = io.StringIO()
    HtmlReporter(report).render(out)
    page = out.getvalue()
    assert re.search(rf'<td class="{k.css}[^"]*" data-key="{k.severity:02d} {verdict} '
                     rf'[^"]*"><a href="#{re.escape(cid)}">', page), verdict
    assert k.css == ("bad" if verdict in BAD else "good" if verdict in GOOD else "other")

    # history.html: the run's latest square of this kind, in its colour, in the legend
    page = history_page(report, tmp_path)
    assert re.search(rf'<td class="k-{verdict}[^"]*" title="b {ROW}: {verdict} in r1', page)
    assert f".k-{verdict}{{background:{k.paint}}}" in page
    assert f'<i class="k-{verdict}"></i>{verdict}</span>' in page

    # junit.xml: passing only when good; a bad kind fails or errs
    out = io.StringIO()
    JunitReporter(report).render(out)
    top = ET.fromstring(out.getvalue().split("\n", 1)[1])
    case = next(c for c in top.iter("testcase") if c.get("name") == cid)
    shown = {child.tag for child in case} & {"failure", "error", "skipped"}
    assert shown == ({k.junit} if k.junit != "passed" else set())
    assert (not shown) == (verdict in GOOD)
    if verdict in BAD:
        assert shown & {"failure", "error"}

    # the issue draft: a bad kind is titled with its words; any other has no issue
    if verdict in BAD:
        out = io.StringIO()
        IssueReporter.from_results(report, ROW).render(out)
        assert out.getvalue().startswith(f"# s {k.title} in b (not in good)\n")
    else:
        with pytest.raises(InputError, match="no bad cell"):
            IssueReporter.from_results(report, ROW)

    # compare: two hosts, ok on one and this kind on the other
    ok, this = {cid: result("b", 1, "ok")}, {cid: report.results[cid]}
    said = compare_hosts(ok, this, ("A", "B")).sentences()
    if verdict in BAD:
        assert said == [f"s {k.verb} only on B with b (not on A)"]
    elif verdict == "ok":
        assert said == []
    else:
        assert said == [f"s with b: ok on A, {verdict} on B"]

    # explain: a bad kind is paired with its last good; attributed as its kind says, but
    # for memory where only time is bad (no peak above the baseline's here)
    assert kinds_for(report.results[cid]) == (
        tuple(a for a in k.attribute if a not in MEMORY) if verdict in TIMED else k.attribute)
    assert k.attribute and set(k.attribute) <= set(WHERE_KINDS)
    found = [(p.cell, p.good) for p in pairs(report.results)]
    assert found == ([(cid, f"good.{ROW}")] if verdict in BAD else [])


def test_grid_and_page_read_their_looks_from_the_kind_table() -> None:
    """The grid's tokens and report.html's colours are the kind table's, one per verdict a
    report shows, told apart (two kinds with one symbol or colour could not be read)."""
    from harness.analysis.kinds import LOOKS, NOT_RUN, STALE, UNREADABLE
    from harness.report.grid import GLYPHS
    from harness.report.html import KIND_COLOURS

    assert set(LOOKS) == set(KINDS) | {NOT_RUN, UNREADABLE, STALE}
    assert {k: g.symbol for k, g in GLYPHS.items()} == {k: v.symbol for k, v in LOOKS.items()}
    assert {k: v.paint for k, v in LOOKS.items()} == KIND_COLOURS
    assert len({v.symbol for v in LOOKS.values()}) == len(LOOKS)
    assert len({v.paint for v in LOOKS.values()}) == len(LOOKS)
    assert all(re.fullmatch(r"#[0-9a-f]{6}", v.paint) for v in LOOKS.values())
    assert all(len(v.symbol) == 1 for v in LOOKS.values())
