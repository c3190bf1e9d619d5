"""`harness bisect matrix.yaml [--good A --bad B]`: first bad image without a full sweep."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import matrixfile
from harness.app import answer
from harness.bisect import BisectOptions, between, bisect_row, check_reuse, row_cells
from harness.cli import options, printer
from harness.errors import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_UNDECIDED,
    InputError,
)
from harness.preflight import compile_scenarios
from harness.stages.options import apply_overrides

if TYPE_CHECKING:
    from harness.bisect import BisectOutcome, Reuse


def add_parser(sub: Any) -> None:
    p = sub.add_parser("bisect", help="find the first bad image of one row by bisection")
    p.add_argument("matrix", type=Path, help="matrix YAML file; `image:` order is version order")
    p.add_argument("--scenario", metavar="ID", help="scenario id (needed if several)")
    p.add_argument("--gpu", metavar="G", help="GPU value or label, e.g. 0 or gpu0 (needed "
                                              "if several)")
    p.add_argument("--good", metavar="IMAGE",
                   help="a known-good image (label or reference): bisect from here")
    p.add_argument("--bad", metavar="IMAGE",
                   help="a known-bad image (label or reference): bisect up to here")
    p.add_argument("--repeats", type=int, default=1,
                   help="extra probes of an image whose verdict stays ambiguous (default 1)")
    p.add_argument("--reuse", type=Path, action="append", default=[], metavar="DIR",
                   help="also reuse finished cells of this results directory (repeatable)")
    options.add(p, "out", "runtime", "docker-host", "iterations", "warmup", "budget", "quiet",
                out_keeps="the bisect keeps its cells in <out>/<name>/bisect-<row> and "
                          "reuses them on the next run")
    options.add(p, "format")
    p.set_defaults(func=run)


@answer.answers("bisect", {"dir": None, "row": None, "images": [], "found": False,
                           "first_bad": None, "last_good": None, "sentence": "", "step": None,
                           "diff": [], "probes": [], "runs": 0, "reused": 0,
                           "reused_from": {}, "full_sweep": 0})
def run(args: argparse.Namespace) -> int:
    options.check(args)
    if args.repeats < 0:
        raise InputError("--repeats must be >= 0")
    check_reuse(args.reuse)
    matrix = matrixfile.load(args.matrix)
    cells = apply_overrides(between(row_cells(matrix, args.scenario, args.gpu), args.good,
                              args.bad, matrix.file), args.iterations, args.warmup,
                            args.budget)
    compile_scenarios(cells)
    asked = BisectOptions(args.matrix, args.out, args.runtime, args.docker_host, args.quiet,
                          args.repeats, tuple(args.reuse))
    outcome, cache = bisect_row(asked, matrix, cells, printer(args.quiet))
    show(outcome, cache, len(cells))
    if not outcome.found:
        sweep = f"harness sweep {shlex.quote(str(args.matrix))} -k {outcome.row}"
        print(f"  fix: {outcome.fix(sweep)}", file=sys.stderr)
        # An endpoint that stayed undecided is no answer (exit 4), not a wrong input.
        return EXIT_UNDECIDED if outcome.undecided_end else EXIT_BAD_INPUT
    return EXIT_REGRESSION if outcome.first_bad else EXIT_OK


def show(outcome: BisectOutcome, cache: Reuse, cells: int) -> None:
    """The first bad image, the fingerprint diff and the cost, in words or JSON."""
    whence = "; ".join(f"{n} from {where}" for where, n in cache.sources.items())
    if answer.active():
        answer.update(
            dir=str(cache.store.root), row=outcome.row, images=outcome.labels, found=outcome.found,
            first_bad=outcome.first_bad, last_good=outcome.last_good,
            sentence=outcome.sentence(), step=outcome.step,
            diff=[{"what": w, "good": g, "bad": b} for w, g, b in outcome.diff()],
            probes=[answer.cell_ref(r) for _, r in sorted(outcome.results.items())],
            runs=outcome.runs, reused=outcome.reused, reused_from=dict(cache.sources),
            full_sweep=cells)
        return
    print(f"\n{outcome.row}: {outcome.sentence()}")
    for what, good, bad in outcome.diff():
        print(f"  {what}: {good} -> {bad}")
    print(f"{outcome.runs} cell run(s), {outcome.reused} reused"
          + (f" ({whence})" if whence else "")
          + f"; a full sweep of this row is {cells} runs")


