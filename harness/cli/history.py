"""`harness history reports/NAME`: every sweep and watch run of a matrix joined, per row
and host over images in release order; history.html beside the runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.answers.history import read_history
from harness.app.exits import exit_code
from harness.cli import answer, options, without_out
from harness.errors import EXIT_OK, EXIT_UNDECIDED, StoreError
from harness.report.grid import console_width, say
from harness.report.history import HistoryConsole, latest_report, write_html
from harness.result.words import cell_text
from harness.store.gate import read_gated

if TYPE_CHECKING:
    from harness.answers.history import History
    from harness.report import Report


def add_parser(sub: Any) -> None:
    p = sub.add_parser("history", help="every run of a matrix joined: each image's latest "
                                       "verdict per row and host, flaky images marked")
    p.add_argument("dir", type=Path, metavar="reports/NAME",
                   help="the directory of a matrix's (or watch suite's) runs, the one "
                        "above its <timestamp> directories")
    options.add(p, "width", "quiet")
    p.add_argument("--no-html", action="store_true",
                   help="do not write reports/NAME/history.html")
    answer.add(p)
    p.set_defaults(func=run)


@answer.answers("history", {"name": None, "dir": None, "html": None, "images": [],
                            "runs": [], "lines": [], "rows": []})
def run(args: argparse.Namespace) -> int:
    """0 when every latest verdict is good; else as `harness report` exits on the
    latest verdicts (1 a bad one, 3 an unavailable one, 4 an undecided or unreadable
    one); 4 too when a run was left out because it does not read."""

    options.check(args)
    history = read_history(args.dir)
    report = latest_report(history)
    if answer.active():
        answer.update(**history_json(history, report))
    else:
        HistoryConsole(history, report).render(sys.stdout, args.width)
    width = console_width(sys.stdout, args.width)
    if not args.no_html:
        try:
            path = write_html(history, report)
        except StoreError as exc:
            raise without_out(exc, f"harness history {args.dir} --no-html prints it "
                                   "without writing") from exc
        answer.update(html=str(path))
        if not args.quiet and not answer.active():
            say(sys.stdout, f"\nwritten: {path}", width)
    code = exit_code(report)
    note = report.incomplete_note()
    for line in [*stale_note(history.runs[-1].path), *([f"\n{note}"] if note else [])]:
        answer.note(line)
        if not answer.active():
            say(sys.stdout, line, width)
    if code == EXIT_OK and any("does not read" in n for n in history.notes):
        return EXIT_UNDECIDED
    return code


def stale_note(newest: Path) -> list[str]:
    """The newest run's cells made from inputs that have changed since (the gate,
    `store.gate`): a history is of runs as they ran, but its latest verdicts are then
    not the matrix's now; said with the command that runs them again."""
    found, _ = read_gated(newest)
    if not found.stale:
        return []
    return [f"\n{len(found.stale)} cell(s) of the newest run ({newest.name}) ran before "
            f"their inputs changed ({next(iter(found.stale.values()))}); its verdicts are "
            f"not the matrix's now\n  fix: {found.refresh} runs them again"]


def history_json(history: History, report: Report) -> dict[str, object]:
    """history's answer in JSON mode, from what its table is drawn from: the runs, each
    line's latest reading of each image (with its run) and its flaky images, and the
    rows' answers over the latest verdicts (`RowAnswer`s, as results.json keeps them)."""
    lines = []
    for line in history.lines:
        latest = {}
        for image in line.seen:
            s = line.latest(image)
            if s is not None:
                latest[image] = {"run": s.run.tag, "cell": s.cell, "verdict": s.verdict,
                                 "text": cell_text(s.result) if s.result else None,
                                 "why": s.why}
        lines.append({"row": line.row, "host": line.host, "name": line.name,
                      "latest": latest, "flaky": [
                          {"image": f.image, "seen": [{"run": x.run.tag, "verdict": x.verdict}
                                                      for x in f.seen]}
                          for f in line.flaky()]})
    for text in history.notes:
        answer.note(text)
    return {"name": history.name, "dir": str(history.root), "images": list(history.images),
            "runs": [{"tag": r.tag, "name": r.name, "kind": r.kind, "started": r.started,
                      "images": list(r.images), "watch": r.watch} for r in history.runs],
            "lines": lines, "rows": list(report.rows)}
