"""`harness report DIR`: re-render reports from stored results; `--issue ROW`: a bug report."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.errors import EXIT_OK, EXIT_REGRESSION, InputError
from harness.report import (
    ConsoleReporter,
    HtmlReporter,
    IssueReporter,
    JunitReporter,
    MarkdownReporter,
    Renderer,
    Report,
    load_results,
    render_text,
    write_all,
)
from harness.store import RunStore, load_json

FORMATS = ("console", "md", "html", "junit", "json")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("report", help="re-render reports from a results directory")
    p.add_argument("dir", type=Path, help="reports/<name>/<timestamp>")
    p.add_argument("--format", choices=FORMATS, default="console",
                   help="what to print on stdout (every file is rewritten either way)")
    p.add_argument("--issue", metavar="ROW",
                   help="write issue-ROW.md, a bug report draft for row ROW (gpu0.rfft_loop)"
                        ", and print it")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json

    if not args.dir.is_dir():
        raise InputError(f"{args.dir}: no such directory; pass reports/<name>/<timestamp>")
    results = load_results(args.dir)
    if not results:
        raise InputError(f"{args.dir}: no cells/*/result.json here; pass a directory "
                         "written by `harness sweep`")
    old = load_json(args.dir / "results.json") or {}
    name = old.get("name") or args.dir.parent.name
    report = Report.from_results(name, results, old.get("meta"), args.dir)
    store = RunStore(args.dir)
    if args.issue is not None:
        text = render_text(IssueReporter.from_results(report, args.issue))
        path = store.write(f"issue-{args.issue}.md", text)
        sys.stdout.write(text)
        print(f"\nwritten: {path}", file=sys.stderr)
        return EXIT_REGRESSION
    write_all(store, report)
    if args.format == "console":
        ConsoleReporter.from_results(report).render(sys.stdout)
    elif args.format == "json":
        sys.stdout.write(json.dumps(report.to_json(), indent=1, sort_keys=True, default=str)
                         + "\n")
    else:
        makers: dict[str, Callable[[Report], Renderer]] = {
            "md": MarkdownReporter.from_results, "html": HtmlReporter.from_results,
            "junit": JunitReporter.from_results}
        reporter = makers[args.format](report)
        sys.stdout.write(render_text(reporter))
    return EXIT_REGRESSION if report.bad_cells else EXIT_OK
