"""Renderers over one Report model: console, markdown, json (results.json)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from harness.report.console import ConsoleReporter
from harness.report.markdown import MarkdownReporter
from harness.report.model import Report
from harness.store.results import RunStore, atomic_write_text, load_json


def write_all(store: RunStore, report: Report) -> list[Path]:
    """results.json and report.md into the store, atomically."""
    md = io.StringIO()
    MarkdownReporter.from_results(report).render(md)
    return [store.write("results.json", report.to_json()), store.write("report.md", md.getvalue())]


def load_results(root: Path) -> dict[str, dict[str, Any]]:
    """Cell results under a results directory (cells/*/result.json)."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(root.glob("cells/*/result.json")):
        data = load_json(path)
        if isinstance(data, dict) and "verdict" in data:
            out[data["id"]] = data
    return out


def dump_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


__all__ = ["ConsoleReporter", "MarkdownReporter", "Report", "load_results", "write_all"]
