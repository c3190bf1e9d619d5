"""Renderers over one Report model: console, markdown, html, junit, json (results.json)."""

from __future__ import annotations

import dataclasses
import importlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TextIO

from harness.errors import InputError
from harness.result.codec import JSON, DecodeError, decode
from harness.result.model import CellResult, Plan, Planned
from harness.store.results import PLAN_FILE, RunStore, load_json, read_cells

if TYPE_CHECKING:
    from harness.report.console import ConsoleReporter
    from harness.report.html import HtmlReporter
    from harness.report.issue import IssueReporter
    from harness.report.junit import JunitReporter
    from harness.report.markdown import MarkdownReporter
    from harness.report.model import Report

# The renderers and the model load when first asked for (PEP 562): a module of this
# package (the live display a sweep shows while its first container runs) is imported
# without them, and with them NumPy, Jinja2 and tabulate (the prefetch thread's work).
_LAZY = {"ConsoleReporter": "console", "HtmlReporter": "html", "IssueReporter": "issue",
         "JunitReporter": "junit", "MarkdownReporter": "markdown", "Report": "model"}


if not TYPE_CHECKING:   # mypy reads the names above, and still refuses unknown ones
    def __getattr__(name: str) -> object:
        if name in _LAZY:
            value = getattr(importlib.import_module(f"harness.report.{_LAZY[name]}"), name)
            globals()[name] = value
            return value
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Renderer(Protocol):
    def render(self, out: TextIO) -> None: ...


def render_text(reporter: Renderer) -> str:
    """What a renderer writes, as a string."""
    out = io.StringIO()
    reporter.render(out)
    return out.getvalue()


def write_all(store: RunStore, report: Report) -> list[Path]:
    """results.json, report.md, report.html and junit.xml into the store, atomically;
    above `html.INLINE_CELLS` cells, each cell's plots on a page of its own
    (cells/<id>/cell.html, rewritten only where the cell changed).

    Raises:
        StoreError: the results directory cannot be written.
    """
    from harness.report.html import HtmlReporter
    from harness.report.junit import JunitReporter
    from harness.report.markdown import MarkdownReporter

    if report.root is None:  # the HTML links (and plots) the files next to the results
        report = dataclasses.replace(report, root=store.root,
                                     series=report.series.at(store.root))
    html = HtmlReporter.from_results(report)
    # One line, through json's C encoder: indented, results.json of 1,600 cells took
    # most of `harness report`'s time.
    paths = [store.write("results.json", results_text(report.to_json())),
             store.write("report.md", render_text(MarkdownReporter.from_results(report))),
             store.write("report.html", render_text(html)),
             store.write("junit.xml", render_text(JunitReporter.from_results(report)))]
    html.write_cells(store.root)
    return paths


def results_text(data: dict[str, JSON]) -> str:
    """results.json's text: one line, keys sorted, but its cells last, so its name and
    meta read from the file's start (`store.jsonhead.load_json_keys`)."""
    head = {k: v for k, v in data.items() if k != "cells"}
    text = json.dumps(head, sort_keys=True, default=str)
    if "cells" not in data:
        return text + "\n"
    cells = json.dumps(data["cells"], sort_keys=True, default=str)
    return f"{text[:-1]}{', ' if head else ''}\"cells\": {cells}}}\n"


@dataclass(frozen=True)
class RunDir:
    """What a results directory holds: readable cell results, the cells whose
    result.json cannot be read (with why), and the sweep's plan where it was kept."""

    results: dict[str, CellResult]
    unreadable: dict[str, str]
    planned: tuple[Planned, ...] = ()
    has_plan: bool = False
    matrix: str = ""             # the matrix file the sweep ran, as plan.json says
    # Where `planned` came from: plan.json; in a directory of an older sweep (none
    # written), its results.json (the cells a finished sweep had) or else its
    # matrix.yaml (every cell of the matrix, as an interrupted sweep left no other).
    plan_from: str = ""
    # Each readable cell's result.json object as it was read, where it is of the schema
    # this harness writes (decoding and encoding it again gives the same object):
    # results.json copies these instead of encoding 1,600 cells again.
    stored: dict[str, dict[str, JSON]] = dataclasses.field(default_factory=dict)


def rerun_line(root: Path) -> str:
    """The command that runs a sweep's unreadable or missing cells again into `root`,
    from here (--resume reruns a cell whose result.json does not read)."""
    from harness.store.runs import SWEEP, kind_of, matrix_file, shown

    found = matrix_file(root)
    matrix = shown(found) if found is not None else "MATRIX"
    if kind_of(root) != SWEEP:
        return f"harness sweep {matrix}"
    return f"harness sweep {matrix} --resume {shown(root)}"


def read_run(root: Path) -> RunDir:
    """Everything `harness report` needs to tell a whole answer from a partial one.

    Raises:
        InputError: a result.json of the wrong shape (the message names the file and
            the key), or a plan.json that is not one.
    """
    read = read_cells(root, "\n  fix: re-run that cell: delete its result.json, then "
                            f"{rerun_line(root)}")
    results, unreadable, stored = read.results, read.unreadable, read.stored
    plan = root / PLAN_FILE
    if not plan.is_file():
        for source, cells in (("results.json", planned_by_results(root)),
                              ("matrix.yaml", planned_by_matrix(root))):
            if cells:
                return RunDir(results, unreadable, cells, True, plan_from=source,
                              stored=stored)
        return RunDir(results, unreadable, stored=stored)
    try:
        found = decode(Plan, load_json(plan), "plan", parsed=True)
    except DecodeError as exc:
        raise InputError(f"{plan}: {exc}\n  fix: delete it to report the cells there "
                         "are without checking for missing ones") from exc
    return RunDir(results, unreadable, found.cells, True, found.matrix, PLAN_FILE, stored)


def planned_by_results(root: Path) -> tuple[Planned, ...]:
    """The cells an older sweep's results.json lists: it was written when the sweep
    finished, so a cell it has and the directory lacks was deleted or cut short."""
    data = load_json(root / "results.json")
    cells = data.get("cells") if isinstance(data, dict) else None
    out: list[Planned] = []
    for cid, cell in sorted(cells.items()) if isinstance(cells, dict) else ():
        image = cell.get("image") if isinstance(cell, dict) else None
        row = cell.get("row") if isinstance(cell, dict) else None
        label = image.get("label") if isinstance(image, dict) else None
        index = image.get("index") if isinstance(image, dict) else None
        if not (isinstance(row, str) and isinstance(label, str) and isinstance(index, int)):
            return ()     # not a results.json this harness wrote: no plan from it
        out.append(Planned(cid, row, label, index))
    return tuple(out)


def planned_by_matrix(root: Path) -> tuple[Planned, ...]:
    """Every cell of the directory's copy of its matrix (an older sweep that was
    interrupted left no other list); none when the copy does not read."""
    from harness.errors import SpecError
    from harness.matrixfile import parse

    path = root / "matrix.yaml"
    try:
        matrix = parse(path.read_text(encoding="utf-8"), path, check_files=False)
    except (OSError, UnicodeDecodeError, SpecError):
        return ()
    return tuple(Planned(c.id, c.row, c.image.label, c.image.index) for c in matrix.cells)


def load_results(root: Path) -> dict[str, CellResult]:
    """Cell results under a results directory (cells/*/result.json, schema 1 to 3);
    unreadable ones are left out (`read_run` names them).

    Raises:
        InputError: a result.json that is not one this harness can read (the message
            names the file and the key).
    """
    return read_run(root).results


__all__ = [
    "ConsoleReporter",
    "HtmlReporter",
    "IssueReporter",
    "JunitReporter",
    "MarkdownReporter",
    "Renderer",
    "Report",
    "RunDir",
    "load_results",
    "read_run",
    "render_text",
    "write_all",
]
