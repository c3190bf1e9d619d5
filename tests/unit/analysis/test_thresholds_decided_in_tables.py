"""Every threshold a decision compares is compared in the tables' modules (issue 61).

A comparison of an `AnalysisConfig` field (`cfg.min_ratio`, `cfg.live_floor_bytes`, ...)
anywhere else decides beside the table, where `--why` cannot show it. A module that
still compares one for a reason that decides nothing about a run is listed with how
many comparisons it holds and why: a new comparison there, or one in any other module,
fails this test until it moves into a table (`rules`) or is listed here with its reason.
"""

from __future__ import annotations

import ast
import dataclasses
from collections import Counter
from pathlib import Path

from harness.thresholds import AnalysisConfig

ROOT = Path(__file__).resolve().parents[3] / "harness"
TABLES = {"analysis/rules.py", "thresholds.py"}
# Modules that still compare a threshold, and why it is no decision about a run: the
# length a command line asks for, refused as input before any cell runs.
STILL = {
    "preflight.py": (1, "iterations too few to decide: an input error before any run, "
                        "no cell's verdict"),
}


def compared_thresholds() -> Counter[str]:
    """How many comparisons of an `AnalysisConfig` field each module of harness/ makes."""
    fields = {f.name for f in dataclasses.fields(AnalysisConfig)}
    found: Counter[str] = Counter()
    for path in ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Compare):
                continue
            for side in (node.left, *node.comparators):
                found[path.relative_to(ROOT).as_posix()] += sum(
                    isinstance(sub, ast.Attribute) and sub.attr in fields
                    for sub in ast.walk(side))
    return Counter({k: v for k, v in found.items() if v})


def test_thresholds_are_compared_in_the_tables_or_listed() -> None:
    found = compared_thresholds()
    outside = {m: n for m, n in found.items() if m not in TABLES}
    more = {m: n for m, n in outside.items() if n > STILL.get(m, (0, ""))[0]}
    assert not more, (
        f"threshold comparisons outside the tables: {more}; move the decision into a "
        "rule of a table (harness/analysis/rules.py)")


def test_the_list_is_not_stale() -> None:
    found = compared_thresholds()
    stale = {m: (n, found.get(m, 0)) for m, (n, _) in STILL.items() if found.get(m, 0) < n}
    assert not stale, f"fewer comparisons than listed (lower STILL): {stale}"


def test_the_memory_kind_compares_nothing_outside_its_table() -> None:
    # memory.py fits slopes; the rules decide what they mean.
    assert compared_thresholds().get("analysis/memory.py", 0) == 0
