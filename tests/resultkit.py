"""Test fixtures as typed results: hand-built result.json dicts through the loader."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.result.model import CellResult, load_result


def as_result(data: Mapping[str, Any]) -> CellResult:
    """A CellResult from a partial result dict (id, row, verdict and image filled in)."""
    image = {"label": "a", "index": 0, **dict(data.get("image") or {})}
    return load_result({"id": "a.gpu0.s", "row": "gpu0.s", "verdict": "ok", **data,
                        "image": image})


def as_results(results: Mapping[str, Mapping[str, Any]]) -> dict[str, CellResult]:
    return {k: as_result(v) for k, v in results.items()}
