"""Each mechanism once (issue 50): one KiB formatter, one reuse check. A second copy
of either is how answers came to depend on the path a question took."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def defined(name: str) -> list[str]:
    return [f"{p.relative_to(ROOT)}" for p in sorted((ROOT / "harness").rglob("*.py"))
            for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
            if isinstance(node, ast.FunctionDef) and node.name == name]


def called(name: str) -> set[str]:
    out = set()
    for p in sorted((ROOT / "harness").rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and (
                    getattr(node.func, "id", None) == name
                    or getattr(node.func, "attr", None) == name):
                out.add(f"{p.relative_to(ROOT)}")
    return out


def test_one_kib_formatter() -> None:
    assert defined("kib") == ["harness/analysis/records.py"]


def test_one_reuse_check() -> None:
    """Whether a recorded result answers for a cell now is asked through
    `store.gate.why_not_current`; run keys are compared elsewhere only by the gate's
    own reading of a run and by `compare`'s two runs side by side."""
    assert called("why_changed") <= {"harness/store/gate.py",
                                     "harness/compare.py"}
    assert {"harness/stages/orchestrator.py", "harness/bisect.py", "harness/explain.py",
            "harness/fit.py", "harness/culprit/plan.py",
            "harness/days/journey.py"} <= called("why_not_current")
