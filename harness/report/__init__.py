"""Renderers over one Report model: console, markdown, html, junit, json (results.json)."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path
from typing import Any, Protocol, TextIO

from harness.report.console import ConsoleReporter
from harness.report.html import HtmlReporter
from harness.report.issue import IssueReporter
from harness.report.junit import JunitReporter
from harness.report.markdown import MarkdownReporter
from harness.report.model import Report
from harness.store.results import RunStore, atomic_write_text, load_json


class Renderer(Protocol):
    def render(self, out: TextIO) -> None: ...


def render_text(reporter: Renderer) -> str:
    """What a renderer writes, as a string."""
    out = io.StringIO()
    reporter.render(out)
    return out.getvalue()


def write_all(store: RunStore, report: Report) -> list[Path]:
    """results.json, report.md, report.html and junit.xml into the store, atomically.

    Raises:
        StoreError: the results directory cannot be written.
    """
    if report.root is None:  # the HTML plots read samples.jsonl next to the results
        report = dataclasses.replace(report, root=store.root)
    return [store.write("results.json", report.to_json()),
            store.write("report.md", render_text(MarkdownReporter.from_results(report))),
            store.write("report.html", render_text(HtmlReporter.from_results(report))),
            store.write("junit.xml", render_text(JunitReporter.from_results(report)))]


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


__all__ = ["ConsoleReporter", "HtmlReporter", "IssueReporter", "JunitReporter",
           "MarkdownReporter", "Renderer", "Report", "load_results", "render_text", "write_all"]
