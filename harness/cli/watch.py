"""`harness watch REPO --baseline TAG --matrix SUITE`: run new registry tags vs a baseline."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.cli import options, printer
from harness.errors import EXIT_OK, EXIT_REGRESSION
from harness.report import ConsoleReporter
from harness.stages.options import apply_overrides
from harness.watch import (
    Plan,
    WatchState,
    list_tags,
    make_plan,
    parse_repo,
    run_suite,
    suite_matrix,
    suite_name,
)

if TYPE_CHECKING:
    from harness.watch import WatchOutcome


def add_parser(sub: Any) -> None:
    p = sub.add_parser("watch", help="run a repository's new tags against a baseline tag")
    p.add_argument("repo", metavar="REPO",
                   help="repository without tag, e.g. nvcr.io/nvidia/tensorflow")
    p.add_argument("--baseline", required=True, metavar="TAG",
                   help="known-good tag; only tags of its kind are compared (23.01-tf1-py3: "
                        "every YY.MM-tf1-py3)")
    p.add_argument("--matrix", required=True, type=Path, metavar="FILE",
                   help="the suite: a matrix whose matrix.image and baseline are replaced")
    p.add_argument("--state", type=Path, metavar="FILE",
                   help="last tag checked (default: <out>/<suite name>/watch-state.json)")
    options.add(p, "out")
    p.add_argument("--insecure", action="store_true",
                   help="plain HTTP to the registry (always so for localhost/127.0.0.1)")
    p.add_argument("--dry-run", action="store_true",
                   help="list the new tags and the cells, run nothing, keep the state")
    options.add(p, "docker-host", "iterations", "warmup", "budget", "quiet")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    options.check(args)
    repo = parse_repo(args.repo)
    state = WatchState.load(args.state or args.out / suite_name(args.matrix)
                            / "watch-state.json")
    last = state.last(repo.written)
    # Check the suite before asking the registry, so a bad suite is always exit 2.
    suite_matrix(args.matrix, Plan(repo, args.baseline, last, (), ()))
    tags = list_tags(repo, args.insecure)
    plan = make_plan(repo, args.baseline, tags, last)
    print(f"{repo.written}: {len(tags)} tags; baseline {plan.baseline}; last checked "
          f"{last or '(none: starting from the baseline)'}", flush=True)
    if not plan.new:
        print(f"no new tags after {last or plan.baseline}; nothing to run")
        return EXIT_OK
    print(f"new: {', '.join(plan.new)}", flush=True)
    matrix, text = suite_matrix(args.matrix, plan)
    cells = apply_overrides(list(matrix.cells), args.iterations, args.warmup,
                            args.budget)
    if args.dry_run:
        print(f"would run {len(cells)} cells (state {state.path} unchanged):")
        for c in cells:
            print(f"  {c.id}  {c.image.ref}")
        return EXIT_OK
    outcome, root = run_suite(plan, matrix, text, cells, args.out, args.docker_host,
                              printer(args.quiet))
    return tell(outcome, root, plan, state)


def tell(outcome: WatchOutcome, root: Path, plan: Plan, state: WatchState) -> int:
    """The suite's table and the new tags' answer; the state recorded; 1 when a new
    tag is bad against the baseline."""
    ConsoleReporter.from_results(outcome.report).render(sys.stdout)
    print(f"\nresults: {root} ({', '.join(p.name for p in outcome.paths)})")
    state.record(plan, root, outcome.bad_tags)
    print(f"state: {state.path}: last checked {plan.new[-1]}")
    if outcome.baseline_bad:
        print(f"note: the baseline {plan.baseline} is itself bad in "
              f"{', '.join(outcome.baseline_bad)}: new tags there are not compared with it")
    if outcome.bad_tags:
        print(f"bad new tags vs baseline {plan.baseline}: {', '.join(outcome.bad_tags)}")
        return EXIT_REGRESSION
    print(f"no regression in {', '.join(plan.new)} vs {plan.baseline}")
    return EXIT_OK
