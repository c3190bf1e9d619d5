"""`harness history reports/NAME`: every sweep and watch run of a matrix joined, per row
and host over images in release order; history.html beside the runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from harness.app import answer
from harness.cli import options
from harness.history import HistoryConsole, closing, history_json, history_of, written
from harness.report.grid import console_width, say


def add_parser(sub: Any) -> None:
    p = sub.add_parser("history", help="every run of a matrix joined: each image's latest "
                                       "verdict per row and host, flaky images marked")
    p.add_argument("dir", type=Path, metavar="reports/NAME",
                   help="the directory of a matrix's (or watch suite's) runs, the one "
                        "above its <timestamp> directories")
    options.add(p, "width", "quiet")
    p.add_argument("--no-html", action="store_true",
                   help="do not write reports/NAME/history.html")
    options.add(p, "format")
    p.set_defaults(func=run)


@answer.answers("history", {"name": None, "dir": None, "html": None, "images": [],
                            "runs": [], "lines": [], "rows": []})
def run(args: argparse.Namespace) -> int:
    """Exit as `harness report` would on the latest verdicts; 4 too when a run was
    left out unread."""

    options.check(args)
    history, report = history_of(args.dir)
    if answer.active():
        answer.update(**history_json(history, report))
    else:
        HistoryConsole(history, report).render(sys.stdout, args.width)
    width = console_width(sys.stdout, args.width)
    if not args.no_html:
        path = written(history, report, args.dir)
        answer.update(html=str(path))
        if not args.quiet and not answer.active():
            say(sys.stdout, f"\nwritten: {path}", width)
    code, notes = closing(history, report)
    for line in notes:
        answer.note(line)
        if not answer.active():
            say(sys.stdout, line, width)
    return code
