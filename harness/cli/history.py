"""`harness history reports/NAME`: every sweep and watch run of a matrix joined, per row
and host over images in release order; history.html beside the runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from harness.cli import options, without_out
from harness.errors import EXIT_OK, EXIT_UNDECIDED, StoreError


def add_parser(sub: Any) -> None:
    p = sub.add_parser("history", help="every run of a matrix joined: each image's latest "
                                       "verdict per row and host, flaky images marked")
    p.add_argument("dir", type=Path, metavar="reports/NAME",
                   help="the directory of a matrix's (or watch suite's) runs, the one "
                        "above its <timestamp> directories")
    options.add(p, "width", "quiet")
    p.add_argument("--no-html", action="store_true",
                   help="do not write reports/NAME/history.html")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """0 when every latest verdict is good; else as `harness report` exits on the
    latest verdicts (1 a bad one, 3 an unavailable one, 4 an undecided or unreadable
    one); 4 too when a run was left out because it does not read."""
    from harness.answers.history import read_history
    from harness.cli.sweep import exit_code
    from harness.report.grid import console_width, say
    from harness.report.history import HistoryConsole, latest_report, write_html

    options.check(args)
    history = read_history(args.dir)
    report = latest_report(history)
    HistoryConsole(history, report).render(sys.stdout, args.width)
    width = console_width(sys.stdout, args.width)
    if not args.no_html:
        try:
            path = write_html(history, report)
        except StoreError as exc:
            raise without_out(exc, f"harness history {args.dir} --no-html prints it "
                                   "without writing") from exc
        if not args.quiet:
            say(sys.stdout, f"\nwritten: {path}", width)
    code = exit_code(report)
    for line in stale_note(history.runs[-1].path):
        say(sys.stdout, line, width)
    note = report.incomplete_note()
    if note is not None:
        say(sys.stdout, f"\n{note}", width)
    if code == EXIT_OK and any("does not read" in n for n in history.notes):
        return EXIT_UNDECIDED
    return code


def stale_note(newest: Path) -> list[str]:
    """The newest run's cells made from inputs that have changed since (the gate,
    `store.gate`): a history is of runs as they ran, but its latest verdicts are then
    not the matrix's now; said with the command that runs them again."""
    from harness.store.gate import read_gated

    found, _ = read_gated(newest)
    if not found.stale:
        return []
    return [f"\n{len(found.stale)} cell(s) of the newest run ({newest.name}) ran before "
            f"their inputs changed ({next(iter(found.stale.values()))}); its verdicts are "
            f"not the matrix's now\n  fix: {found.refresh} runs them again"]
