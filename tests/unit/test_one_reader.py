"""Issue 42: the store is the only reader of a run's stored files (result.json,
samples.jsonl, where.json, culprit.json). Every command gets its cells through the gate
(`harness.store.gate`), which checks each one against the inputs as they are now; code
elsewhere that opens one of these files would answer from a cell nobody checked."""

from __future__ import annotations

import ast
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[2] / "harness"
STORED = ("result.json", "samples.jsonl", "where.json", "culprit.json")
CONSTANTS = ("WHERE_FILE", "CULPRIT_FILE")      # harness.store.results's names for them
# Calls that read a file: a path's methods, and the readers that take a path.
METHODS = {"read_text", "read_bytes", "open", "glob", "rglob", "iterdir"}
FUNCTIONS = {"open", "load_json", "load_json_keys", "read_samples", "watch_file", "parse"}
# The store reads them; the agent writes them inside the cell; a cell's run reads its own
# samples as the agent writes them (the run service in stages/context.py: live mode and
# the read after the run), before the cell is stored, so there is nothing yet to check
# against.
ALLOWED = ("store/", "agent/", "stages/context.py")


def names_a_stored_file(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and any(
                name in sub.value for name in STORED):
            return True
        if isinstance(sub, ast.Name) and sub.id in CONSTANTS:
            return True
        if isinstance(sub, ast.Attribute) and sub.attr in CONSTANTS:
            return True
    return False


def readers(source: str) -> list[int]:
    """Lines of `source` that read one of the stored files."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        reads = ((isinstance(func, ast.Attribute) and func.attr in METHODS)
                 or (isinstance(func, ast.Name) and func.id in FUNCTIONS))
        if reads and names_a_stored_file(node):
            found.append(node.lineno)
    return found


def test_the_check_finds_a_reader() -> None:
    assert readers('x = (root / "cells" / cid / "result.json").read_text()\n') == [1]
    assert readers('for p in root.glob(f"cells/*/{WHERE_FILE}"):\n    pass\n') == [1]
    assert readers('data = load_json(root / "culprit" / row / "culprit.json")\n') == [1]
    assert readers('s = read_samples(d / "samples.jsonl")\n') == [1]
    assert readers('store.write(f"cells/{cid}/{WHERE_FILE}", data)\n') == []   # a write


def test_no_module_outside_the_store_reads_a_stored_file() -> None:
    found = []
    for path in sorted(HARNESS.rglob("*.py")):
        rel = path.relative_to(HARNESS).as_posix()
        if rel.startswith(ALLOWED):
            continue
        found += [f"harness/{rel}:{line}" for line in readers(path.read_text())]
    assert found == [], ("read a run's stored files through harness.store (the gate, "
                         "store.results, SeriesCache), not here")
