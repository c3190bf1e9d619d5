"""`harness report DIR --reanalyze [--set analysis.KEY=VALUE] [--write]`: the run decided
again (`reanalyze.app`), its table and what changed printed."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Collection

from harness.app.command import exit_code
from harness.errors import InputError
from harness.reanalyze.app import redecide, write_beside
from harness.report import ConsoleReporter, Report


def reanalyzed(args: argparse.Namespace, recorded: Report,
               outdated: Collection[str] = ()) -> int:
    """`--reanalyze`: every cell decided again; the table, what changed, the exit code
    the sweep would give now. Writes only with `--write`, into a new directory."""
    if args.issue is not None or (args.format not in (None, "console")):
        raise InputError("--reanalyze prints the console table; --issue and --format "
                         f"{args.format or ''} read the directory as recorded")
    again = redecide(args.dir, recorded, args.overrides, outdated)
    report, changed = again.report, again.changed
    ConsoleReporter.from_results(report).render(sys.stdout, width=args.width,
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
