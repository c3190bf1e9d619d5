"""`harness report DIR --why CELL`: the rules of the one memory decision in order, each
with its figures and whether it fired, for one recorded cell (`analysis.rules.why`)."""

from __future__ import annotations

import argparse

from harness.errors import InputError
from harness.report import Report


def why(args: argparse.Namespace, recorded: Report) -> int:
    """Print why CELL got its verdict; 0, or 2 for a cell the directory does not hold.

    Raises:
        InputError: no cell of that id (or ending in it), or one without samples.
    """
    from harness.analysis.memory import trends_and_fills
    from harness.analysis.rules import Evidence
    from harness.analysis.rules import why as rules_why
    from harness.matrixfile.load import analysis_of
    from harness.store import SeriesCache

    ids = sorted(recorded.results)
    found = [c for c in ids if c == args.why] or [c for c in ids if c.endswith(args.why)]
    if len(found) != 1:
        raise InputError(f"--why {args.why}: {'no' if not found else 'more than one'} cell "
                         f"of {args.dir} is called so\nfix: one of {', '.join(ids[:8])}")
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
