"""`harness report DIR`: re-render reports from stored results; `--issue ROW`: a bug report."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import EXIT_OK, InputError

if TYPE_CHECKING:
    from harness.report import Renderer, Report

FORMATS = ("console", "md", "html", "junit", "json")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("report", help="re-render reports from a results directory")
    p.add_argument("dir", type=Path,
                   help="reports/<name>/<timestamp>, or reports/<name> for the newest run")
    p.add_argument("--format", choices=FORMATS,
                   help="print this one rendering on stdout and exit 0; no file is "
                        "rewritten (without it: rewrite every report file, print the "
                        "table, exit as the sweep did)")
    p.add_argument("--issue", metavar="ROW",
                   help="write issue-ROW.md, a bug report draft for row ROW (gpu0.rfft_loop)"
                        ", and print it")
    p.set_defaults(func=run)


def newest_run(path: Path) -> Path:
    """`path` itself if it holds cells, else its newest results subdirectory."""
    if (path / "cells").is_dir() or not path.is_dir():
        return path
    runs = sorted(p for p in path.iterdir() if p.is_dir() and (p / "cells").is_dir())
    return runs[-1] if runs else path


def run(args: argparse.Namespace) -> int:
    import json

    from harness.report import (
        ConsoleReporter,
        HtmlReporter,
        IssueReporter,
        JunitReporter,
        MarkdownReporter,
        Report,
        load_results,
        render_text,
        write_all,
    )
    from harness.store import RunStore, load_json

    if not args.dir.is_dir():
        raise InputError(f"{args.dir}: no such directory; pass reports/<name>/<timestamp>")
    args.dir = newest_run(args.dir)
    results = load_results(args.dir)
    if not results:
        raise InputError(f"{args.dir}: no cells/*/result.json here; pass a directory "
                         "written by `harness sweep`")
    old = load_json(args.dir / "results.json")
    old = old if isinstance(old, dict) else {}
    name = old.get("name")
    meta = old.get("meta")
    report = Report.from_results(name if isinstance(name, str) and name
                                 else args.dir.parent.name, results,
                                 meta if isinstance(meta, dict) else None, args.dir)
    store = RunStore(args.dir)
    if args.issue is not None:
        text = render_text(IssueReporter.from_results(report, args.issue))
        path = store.write(f"issue-{args.issue}.md", text)
        sys.stdout.write(text)
        print(f"\nwritten: {path}", file=sys.stderr)
        return EXIT_OK
    if args.format is None:
        # Re-render: every file rewritten, the table printed, the sweep's exit code.
        write_all(store, report)
        ConsoleReporter.from_results(report).render(sys.stdout)
        from harness.cli.sweep import exit_code

        return exit_code(report)
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
    return EXIT_OK
