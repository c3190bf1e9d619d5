"""Issue 38 item 3: every rule about a verdict kind lives in harness/analysis/kinds.py.
The renderers and the answers that read kinds name none of their own (no literal kind
name compared with, no literal list of them), the agent's attribution kinds are listed
once (agent/fields.py), and what used to be decided beside the list now reads it: the
sort order of a report's pseudo-verdicts, and a table cell's colour (from its verdict,
never from the first word of its text)."""

from __future__ import annotations

import ast
import io
import re
from pathlib import Path

from harness.agent.fields import WHERE_KINDS
from harness.analysis.kinds import KINDS, LOOKS, NOT_RUN, UNREADABLE
from harness.report import ConsoleReporter, HtmlReporter, Report
from harness.report.grid import ANSI
from harness.result.model import CellResult, Planned
from tests.resultkit import as_result

ROOT = Path(__file__).resolve().parents[2]
# The modules that show or read verdict kinds (a verdict is *set* in analysis.decision,
# which names the kind it sets; trend kinds, "leak" among them, are another list).
READERS = ("harness/report", "harness/result/model.py", "harness/fit.py",
           "harness/reanalyze.py", "harness/stages/settle.py", "harness/cli")
NAMES = set(LOOKS)


def _strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in _strings(e)]
    return []


def own_kinds(path: Path, rel: str) -> list[str]:
    """A module's comparisons with a literal verdict name, and its literal collections
    of two or more of them."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            named = [s for side in (node.left, *node.comparators) for s in _strings(side)
                     if s in NAMES]
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            named = [s for s in _strings(node) if s in NAMES]
            named = named if len(named) >= 2 else []
        else:
            continue
        if named:
            found.append(f"{rel}:{node.lineno} names {', '.join(sorted(set(named)))}")
    return sorted(set(found))


def kinds_named_outside(root: Path) -> list[str]:
    out = []
    for where in READERS:
        top = root / where
        for path in sorted(top.rglob("*.py") if top.is_dir() else [top] if top.exists()
                           else []):
            out += own_kinds(path, str(path.relative_to(root)))
    return out


def where_kind_lists(root: Path) -> list[str]:
    """Literal lists of every attribution kind outside the protocol's own (fields.py)."""
    out = []
    for path in sorted((root / "harness").rglob("*.py")):
        if path == root / "harness" / "agent" / "fields.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)) \
                    and set(WHERE_KINDS) <= set(_strings(node)):
                out.append(f"{path.relative_to(root)}:{node.lineno}")
    return out


def test_readers_of_kinds_name_none_of_their_own() -> None:
    assert kinds_named_outside(ROOT) == []


def test_the_attribution_kinds_are_listed_once() -> None:
    assert where_kind_lists(ROOT) == []


def test_the_checks_find_a_kind_of_its_own(tmp_path: Path) -> None:
    (tmp_path / "harness" / "report").mkdir(parents=True)
    (tmp_path / "harness" / "agent").mkdir()
    (tmp_path / "harness" / "report" / "a.py").write_text(
        'def f(v):\n    if v == "suspected":\n        return 1\n'
        '    return v in {"ok", "leak"} or v == "x"\n')
    (tmp_path / "harness" / "agent" / "attr_x.py").write_text(
        'KINDS = ("heap", "stack", "ops", "device", "native")\n')
    assert [f for f in kinds_named_outside(tmp_path) if "report" in f] == [
        "harness/report/a.py:2 names suspected", "harness/report/a.py:4 names leak, ok"]
    assert where_kind_lists(tmp_path) == ["harness/agent/attr_x.py:1"]


def _cell(label: str, index: int, verdict: str) -> CellResult:
    return as_result({"id": f"{label}.gpu0.s", "row": "gpu0.s", "verdict": verdict,
                      "reason": f"why {verdict}", "image": {"label": label, "index": index},
                      "gpu": {"value": "0", "label": "gpu0"},
                      "scenario": {"id": "s", "script": "s.py"},
                      "settings": {"iterations": 100, "warmup": 10}})


def test_a_pseudo_verdict_sorts_after_every_kind_on_the_page() -> None:
    """A cell the directory lacks ("not run") or cannot read sorts after every kind in
    report.html's table (it ranked as a slowdown before)."""
    cells = [_cell("a", 0, "ok"), _cell("c", 2, "leak")]
    planned = (Planned("a.gpu0.s", "gpu0.s", "a", 0), Planned("b.gpu0.s", "gpu0.s", "b", 1),
               Planned("c.gpu0.s", "gpu0.s", "c", 2), Planned("d.gpu0.s", "gpu0.s", "d", 3))
    report = Report.from_results("m", {c.id: c for c in cells}, {}, None, planned=planned,
                                 unreadable={"d.gpu0.s": "cut short"})
    out = io.StringIO()
    HtmlReporter(report).render(out)
    keys = {verdict: int(rank) for rank, verdict in
            re.findall(r'data-key="(\d\d) ([a-z-]+(?: run)?) ', out.getvalue())}
    assert keys[NOT_RUN] > max(k.severity for k in KINDS.values())
    assert keys[UNREADABLE] > max(k.severity for k in KINDS.values())
    assert keys["leak"] == KINDS["leak"].severity and keys["ok"] == KINDS["ok"].severity


def test_a_table_cell_is_coloured_by_its_verdict_not_its_words() -> None:
    """An image named like a kind ("ok"), before an undecided cell, starts the row's
    answer with that word: the answer column is not a verdict and stays uncoloured."""
    cells = [_cell("ok", 0, "ambiguous"), _cell("b", 1, "leak")]
    report = Report.from_results("m", {c.id: c for c in cells}, {}, None)
    assert report.rows[0].sentence.startswith("ok ambiguous")
    out = io.StringIO()
    ConsoleReporter(report).render(out, colour=True)
    text = out.getvalue()
    assert f"\x1b[{ANSI['red']}mleak" in text
    assert f"\x1b[{ANSI['green']}m" not in text        # no cell here is ok
    assert "ok ambiguous: first bad" in text
