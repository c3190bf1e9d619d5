"""`harness report DIR --why CELL`: the rules of the one memory decision in order, each
with its figures and whether it fired, for one recorded cell (`analysis.rules.why`)."""

from __future__ import annotations

import argparse

from harness.errors import InputError
from harness.report import Report
from harness.store.gate import Gated


def named(pool: list[str], cell: str) -> list[str]:
    """The ids of `pool` that are `cell`, else those that end in it."""
    return [c for c in pool if c == cell] or [c for c in pool if c.endswith(cell)]


def why(args: argparse.Namespace, recorded: Report, gated: Gated) -> int:
    """Print why CELL got its verdict; 0, or 2 for a cell the directory does not hold.

    Raises:
        InputError: no current cell of that id (or ending in it): a stale one is said
            to be stale, with the command that runs it again; or one without samples.
    """
    from harness.analysis.memory import trends_and_fills
    from harness.analysis.rules import Evidence
    from harness.analysis.rules import why as rules_why
    from harness.matrixfile.load import analysis_of
    from harness.store import SeriesCache

    ids = sorted(recorded.results)
    found = named(ids, args.why)
    stale = named(sorted(gated.stale), args.why)
    if not found and len(stale) == 1:
        raise InputError(f"--why {args.why}: {stale[0]} is stale ({gated.stale[stale[0]]}),"
                         " so its verdict is not the matrix's now\nfix: "
                         f"{gated.refresh} runs it again, then harness report {args.dir} "
                         f"--why {args.why}")
    if len(found) != 1:
        raise InputError(f"--why {args.why}: {'no' if not found else 'more than one'} cell "
                         f"of {args.dir} is called so\nfix: "
                         + (f"one of {', '.join(ids[:8])}" if ids else
                            f"harness report {args.dir} names its cells and their state"))
    res = recorded.results[found[0]]
    series = SeriesCache(args.dir)(res.id)
    if series is None or not series.samples:
        raise InputError(f"--why {res.id}: its samples.jsonl is missing or empty, so no rule "
                         f"can be read again\nfix: harness report {args.dir} shows its "
                         "recorded verdict")
    cfg = analysis_of(args.dir / "matrix.yaml", [])
    memory, fills = trends_and_fills(series, cfg)
    print(f"{res.id}: {res.verdict} ({res.reason})")
    print(f"decided by rule: {res.rule or '(not recorded: swept before issue 41)'}")
    print("the memory rules, in order, as this harness reads its samples:")
    for line in rules_why(Evidence(memory, fills), cfg):
        print(line)
    return 0
