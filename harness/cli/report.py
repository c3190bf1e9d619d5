"""`harness report DIR`: re-render reports from stored results; `--issue ROW`: a bug report;
`--why CELL`: the rules in order on one cell's evidence (`app.why`); `--reanalyze`: the run
decided again (`reanalyze`), its table and what changed printed."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import report as reports
from harness.app.command import exit_code
from harness.app.report import (
    KEPT,
    complete_report,
    kept_by_git,
    plan_notes,
    recorded,
    run_dir,
)
from harness.cli import options, without_out
from harness.errors import InputError, StoreError
from harness.report import Report, render_text, rerun_line, write_all
from harness.report.grid import console_width, say
from harness.store import RunStore
from harness.store.results import long_lived, read_kept

if TYPE_CHECKING:
    from harness.report import Renderer
    from harness.store.gate import Gated

FORMATS = ("console", "md", "html", "junit", "json")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("report", help="re-render reports from a results directory")
    p.add_argument("dir", type=Path,
                   help="reports/<name>/<timestamp>, or reports/<name> for the newest run")
    p.add_argument("--format", choices=FORMATS,
                   help="print this one rendering on stdout; no file is rewritten "
                        "(without it: rewrite every report file and print the table); "
                        "either way it exits as the sweep did")
    p.add_argument("--issue", metavar="ROW",
                   help="write issue-ROW.md, a bug report draft for row ROW (gpu0.rfft_loop,"
                        " or a cell id of that row), and print it")
    options.add(p, "width", "quiet", "details")
    p.add_argument("--reanalyze", action="store_true",
                   help="decide every cell again from its samples.jsonl with this harness "
                        "and the directory's matrix.yaml analysis: block (recorded "
                        "confirmation rounds stand); prints the table and what changed, "
                        "writes nothing unless --write")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="analysis.KEY=VALUE",
                   help="with --reanalyze: an analysis setting to decide with instead "
                        "(repeatable), e.g. --set analysis.alpha=0.01")
    p.add_argument("--write", action="store_true",
                   help="with --reanalyze: write the re-decided run as a new results "
                        "directory beside DIR (DIR-reanalyzed); DIR is never rewritten")
    p.add_argument("--why", metavar="CELL",
                   help="print the verdict's rules in order for CELL, each with its "
                        "figures and why it fired or not")
    p.add_argument("--force", action="store_true",
                   help="write the reports even when cells are missing and DIR already "
                        "holds a complete report, or git tracks DIR's files (without it, a "
                        "complete report is never replaced by a partial one, nor a kept "
                        "run's reports rewritten)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    options.check(args)
    try:
        return report_of(args)
    except StoreError as exc:   # a directory it cannot write into
        raise without_out(exc, f"harness report {args.dir} --format console prints it "
                               "without writing anything") from exc


def report_of(args: argparse.Namespace) -> int:
    """What `harness report` does with its arguments: re-decide, draft an issue, print
    one format, or re-render."""
    args.dir = run_dir(args.dir)
    with long_lived():      # the cells read, kept to the end: no collector passes on them
        report, found = read_kept(lambda: recorded(args.dir))
        return _answer(args, report, found)


def _answer(args: argparse.Namespace, report: Report, found: Gated) -> int:
    if args.force and (args.issue is not None or args.format is not None
                       or args.reanalyze):
        raise InputError("--force goes with a plain `harness report DIR` (it lets a "
                         "partial report replace a complete one); --issue, --format "
                         "and --reanalyze write no reports")
    if not args.reanalyze and (args.overrides or args.write):
        raise InputError("--set and --write go with --reanalyze: harness report DIR "
                         "--reanalyze [--set analysis.KEY=VALUE] [--write]")
    if args.why is not None:
        return why(args, report, found)
    if args.reanalyze:
        return reanalyzed(args, report, found.stale)
    if args.issue is not None:
        return issue(report, args.issue, args.dir, args.quiet)
    if args.format is None:
        return rerender(args, report, found)
    return print_format(args, report)


def why(args: argparse.Namespace, recorded: Report, gated: Gated) -> int:
    """`--why CELL`: why CELL got its verdict, printed; exits as `harness report DIR` does.

    Raises:
        InputError: no current cell of that id, or its rules cannot be read again.
    """
    from harness.app import why as reading  # lazy: the rules' tables, for --why alone

    for line in reading.why(args.why, args.dir, recorded, gated):
        print(line)
    return exit_code(recorded)


def reanalyzed(args: argparse.Namespace, recorded: Report,
               outdated: Collection[str] = ()) -> int:
    """`--reanalyze`: every cell decided again; the table, what changed, the exit code
    the sweep would give now. Writes only with `--write`, into a new directory."""
    # lazy: the deciding, for --reanalyze alone
    from harness.reanalyze import redecide, write_beside

    if args.issue is not None or (args.format not in (None, "console")):
        raise InputError("--reanalyze prints the console table; --issue and --format "
                         f"{args.format or ''} read the directory as recorded")
    again = redecide(args.dir, recorded, args.overrides, outdated)
    report, changed = again.report, again.changed
    reports.ConsoleReporter.from_results(report).render(sys.stdout, width=args.width,
                                                        details=args.details)
    how = (" with " + ", ".join(args.overrides)) if args.overrides else ""
    print(f"\nre-decided {len(report.results)} cells from their samples{how}: "
          f"{len(changed)} verdict(s) changed" + (":" if changed else ""))
    for c in changed:
        print(f"  {c.cell}: {c.before} -> {c.after} ({c.reason})"
              + (f"; changed by {c.by}" if c.by else ""))
    note = report.incomplete_note()
    if note is not None:
        print(note)
    if args.write:
        out = write_beside(args.dir, recorded, report, again.planned, again.analysis_set)
        print(f"written: {out} ({args.dir} unchanged)")
    else:
        print(f"nothing written; --write puts the re-decided run beside {args.dir}")
    return exit_code(report)


def issue(report: Report, row: str, root: Path, quiet: bool = False) -> int:
    """`--issue ROW`: issue-ROW.md written beside the run and printed; exits as the
    report does."""
    drafted = reports.IssueReporter.from_results(report, row)   # a row, or a cell's row
    text = render_text(drafted)
    path = RunStore(root).write(f"issue-{drafted.row.row}.md", text)
    sys.stdout.write(text)
    if not quiet:
        print(f"\nwritten: {path}", file=sys.stderr)
    return exit_code(report)


def rerender(args: argparse.Namespace, report: Report, found: Gated) -> int:
    """Re-render: every file rewritten, the table printed, the sweep's exit code; a
    partial report never replaces a whole one unless --force."""

    reports.ConsoleReporter.from_results(report).render(sys.stdout, width=args.width,
                                                        details=args.details)
    width = console_width(sys.stdout, args.width)
    if report.missing_cells:
        missing_said(args, report, found, width)
    elif not args.force and kept_by_git(args.dir):
        say(sys.stdout, f"\n{args.dir}: {KEPT}", width)
    else:
        write_all(RunStore(args.dir), report)
    for line in plan_notes(args.dir, found):
        say(sys.stdout, line, width)
    note = report.incomplete_note()
    if note is not None:
        say(sys.stdout, f"\n{note}", width)
    return exit_code(report)


def missing_said(args: argparse.Namespace, report: Report, found: Gated,
                 width: int | None) -> None:
    """Write a run's partial reports where allowed, and name its missing cells."""
    missing = report.missing_cells
    whole = complete_report(args.dir)
    if whole and not args.force:
        told = ("nothing written: the complete report there is not replaced by "
                "a partial one (--force replaces it)")
    elif not args.force and kept_by_git(args.dir):
        told = KEPT
    else:
        paths = write_all(RunStore(args.dir), report)
        told = ("partial report written (" + ", ".join(p.name for p in paths)
                + "; report.md and results.json name the missing cells)"
                + (", replacing the complete one (--force)" if whole else ""))
    what = "missing or stale" if found.stale else "missing"
    say(sys.stdout, f"\n{args.dir}: {len(missing)} of {len(report.planned)} planned "
        f"cells {what}; {told}:", width)
    for cid in missing:
        say(sys.stdout, f"  {cid}: {found.gaps.get(cid, 'not run (no result.json)')}",
            width)
    say(sys.stdout, f"  fix: {rerun_line(args.dir)} runs them", width)


def print_format(args: argparse.Namespace, report: Report) -> int:
    """`--format F`: that one rendering on stdout, no file rewritten; exits as the sweep
    did, so a CI step fails on a regression."""

    if args.format == "console":
        reports.ConsoleReporter.from_results(report).render(sys.stdout, width=args.width,
                                                            details=args.details)
    elif args.format == "json":
        sys.stdout.write(json.dumps(report.to_json(), indent=1, sort_keys=True, default=str)
                         + "\n")
    else:
        makers: dict[str, Callable[[Report], Renderer]] = {
            "md": reports.MarkdownReporter.from_results,
            "html": reports.HtmlReporter.from_results,
            "junit": reports.JunitReporter.from_results}
        sys.stdout.write(render_text(makers[args.format](report)))
    return exit_code(report)
