"""Test fixtures as typed results: hand-built result.json dicts through the loader."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.analysis.rules import TIME_UNDECIDED
from harness.result.model import CellResult, load_result


def as_result(data: Mapping[str, Any]) -> CellResult:
    """A CellResult from a partial result dict (id, row, verdict and image filled in)."""
    image = {"label": "a", "index": 0, **dict(data.get("image") or {})}
    return load_result({"id": "a.gpu0.s", "row": "gpu0.s", "verdict": "ok", **data,
                        "image": image})


def as_results(results: Mapping[str, Mapping[str, Any]]) -> dict[str, CellResult]:
    return {k: as_result(v) for k, v in results.items()}


# The rules that leave a cell undecided on its step times alone (a busy host, steps that
# rose through the run or never settled): a test of what harness shows or records, not of
# timing, takes them on a busy machine (a fresh-clone CI's cell: "busy host: run-queue
# delay rose 1155 us/step, 214% of the 539 us/step slowdown").
STEPS_UNDECIDED = frozenset(TIME_UNDECIDED)


def only_steps_undecided(cells: Mapping[str, Mapping[str, Any]]) -> bool:
    """Some cell of results.json's `cells` is undecided, each by a step-time rule alone
    (one undecided for its memory is not)."""
    rules = {c["rule"] for c in cells.values() if c["verdict"] == "ambiguous"}
    return bool(rules) and rules <= STEPS_UNDECIDED


def held_ok(cell: Mapping[str, Any] | CellResult | Any) -> bool:
    """A real run's cell (a result.json dict, a CellResult or the API's answer) held no
    finding: `ok`, or undecided by a step-time rule alone. The time of a real run is the
    host's load as much as the code's: on a CI runner at load 11-16 a clean cell's steps
    may read undecided, never its memory (tests/unit/test_verdict_guard.py asks every
    real run's "ok" of this)."""
    if isinstance(cell, Mapping):
        verdict, rule = cell["verdict"], cell.get("rule")
    else:
        verdict = cell.verdict
        rule = getattr(getattr(cell, "result", cell), "rule", None)
    return bool(verdict == "ok" or (verdict == "ambiguous" and rule in STEPS_UNDECIDED))


def held_exit(code: int, cells: Mapping[str, Mapping[str, Any]]) -> bool:
    """A sweep with no finding exited 0, or 4 where step-time rules alone left cells
    undecided (a busy host: `held_ok`)."""
    return code == 0 or (code == 4 and only_steps_undecided(cells))
