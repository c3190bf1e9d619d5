"""Renderers over one Report model: console, markdown, html, junit, json (results.json)."""

from __future__ import annotations

import dataclasses
import importlib
import io
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TextIO, cast

from harness.errors import StoreError
from harness.result.codec import JSON
from harness.store.gate import RunDir, read_run, rerun_line
from harness.store.results import RunStore, atomic_write_parts, long_lived
from harness.store.resultsjson import INDEX_FILE, Entry, holds, index_text, lines_of, stamp_of

if TYPE_CHECKING:
    from harness.report.ci import JunitReporter, MarkdownReporter
    from harness.report.console import ConsoleReporter
    from harness.report.html import HtmlReporter, environment
    from harness.report.issue import IssueReporter
    from harness.report.model import Report

# The renderers and the model load on first use (PEP 562), so the live display imports
# without NumPy, Jinja2 and tabulate. Commands read them as `report.X`.
_LAZY = {"ConsoleReporter": "console", "HtmlReporter": "html", "IssueReporter": "issue",
         "JunitReporter": "ci", "MarkdownReporter": "ci", "Report": "model",
         "environment": "html"}


def _loaded(name: str) -> object:
    # lazy: the renderers (NumPy, Jinja2, tabulate) on first use, by their name in _LAZY
    value = getattr(importlib.import_module(f"harness.report.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


if not TYPE_CHECKING:   # mypy reads the names above, and still refuses unknown ones
    def __getattr__(name: str) -> object:
        if name in _LAZY:
            return _loaded(name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Renderer(Protocol):
    def render(self, out: TextIO) -> None: ...


def render_text(reporter: Renderer) -> str:
    """What a renderer writes, as a string."""
    out = io.StringIO()
    reporter.render(out)
    return out.getvalue()


def write_all(store: RunStore, report: Report) -> list[Path]:
    """Write results.json, report.md, report.html and junit.xml atomically, and past
    `html.INLINE_CELLS` the changed cells' own pages.

    Raises:
        StoreError: the results directory cannot be written.
    """
    html_reporter = cast("type[HtmlReporter]", _loaded("HtmlReporter"))
    markdown = cast("type[MarkdownReporter]", _loaded("MarkdownReporter"))
    junit = cast("type[JunitReporter]", _loaded("JunitReporter"))
    # The report's stamps are this directory's files' only where it read this directory
    # (a re-decided run is written into a new one); the store's own are too.
    here = report.root is not None and report.root.absolute() == store.root
    stored = {**(report.stored if here else {}),
              **{cid: stamp for cid, (stamp, res) in store.stamped.items()
                 if report.results.get(cid) is res}}
    report = dataclasses.replace(report, stored=stored)
    if report.root is None:  # the HTML links (and plots) the files next to the results
        report = dataclasses.replace(report, root=store.root,
                                     series=report.series.at(store.root))
    with long_lived():      # the report's cells, read or measured, outlive this
        html = html_reporter.from_results(report)
        # One line, through json's C encoder: indenting is slow on large runs.
        head = report.to_json(cells=False)
        placed: dict[str, tuple[int, int, int]] = {}

        def results() -> Iterator[str]:
            with lines_of(store.root) as lines:     # the results.json there was
                yield from results_parts(head, report.cells_parts(lines, placed))
        paths = [_write_new(store, "results.json", results)]
        _indexed(store, report, placed, head)
        paths += [_write_new(store, "report.md",
                             render_text(markdown.from_results(report))),
                  _write_new(store, "report.html", render_text(html)),
                  _write_new(store, "junit.xml",
                             render_text(junit.from_results(report)))]
        html.write_cells(store.root)
    return paths


def _write_new(store: RunStore, name: str, text: str | Callable[[], Iterable[str]]
               ) -> Path:
    """Write `text` (or its parts) as `name` unless the file already holds it, so a
    current report changes no byte and no timestamp.

    Raises:
        StoreError: the results directory cannot be written.
    """
    path = store.root / name
    parts: Callable[[], Iterable[str]] = (lambda: [text]) if isinstance(text, str) else text
    if holds(path, parts()):
        return path
    atomic_write_parts(path, parts())
    return path


def _indexed(store: RunStore, report: Report, placed: dict[str, tuple[int, int, int]],
             head: dict[str, JSON]) -> Path:
    """Write results.index for the results.json just written (`placed`: its lines), for
    cells whose result.json the report holds unchanged and whose line says all of it.

    Raises:
        StoreError: the results directory cannot be written.
    """
    start = len(next(results_parts(head, ())).encode("utf-8"))
    known = report.stored
    entries: dict[str, Entry] = {
        cid: (known[cid], start + offset, length, crc)
        for cid, (offset, length, crc) in placed.items()
        if cid in known and not report.results[cid].host_samples}
    try:
        results = stamp_of(os.stat(store.root / "results.json"))
    except OSError as exc:
        raise StoreError(f"cannot read {store.root / 'results.json'} back: "
                         f"{exc.strerror}") from exc
    return _write_new(store, INDEX_FILE, index_text(results, entries))


def results_text(data: dict[str, JSON]) -> str:
    """results.json's text: one line, keys sorted, cells last (`load_json_keys`)."""
    return "".join(results_parts(data))


def results_parts(data: dict[str, JSON], cells: Iterable[str] | None = None
                  ) -> Iterator[str]:
    """`results_text` in parts; `cells`: the cells' object as parts, else `data`'s."""
    head = {k: v for k, v in data.items() if k != "cells"}
    text = json.dumps(head, sort_keys=True, default=str)
    if cells is None and "cells" not in data:
        yield text + "\n"
        return
    yield f"{text[:-1]}{', ' if head else ''}\"cells\": "
    if cells is None:
        yield json.dumps(data["cells"], sort_keys=True, default=str)
    else:
        yield from cells
    yield "}\n"


__all__ = [
    "ConsoleReporter",
    "HtmlReporter",
    "IssueReporter",
    "JunitReporter",
    "MarkdownReporter",
    "Renderer",
    "Report",
    "RunDir",
    "environment",
    "read_run",
    "render_text",
    "rerun_line",
    "write_all",
]
