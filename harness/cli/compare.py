"""`harness compare A B`: where two hosts' results differ; `compare DIR`: the hosts of one
`hosts:` sweep, each against the first; `--image X --image Y`: two images."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.app import answer
from harness.cli import FittedHelpFormatter, options
from harness.compare import (
    Asked,
    FitComparison,
    compare_fits,
    fit_rows,
    missing,
    names,
    one_directory,
    param_of,
    results_compared,
)
from harness.errors import EXIT_OK, EXIT_REGRESSION, EXIT_UNDECIDED, InputError
from harness.report.grid import console_width

if TYPE_CHECKING:
    from harness.compare import Comparison, Row


COMPARE_EPILOG = """examples:
  harness compare DIR_3090 DIR_4090              two hosts' (or two runs') results
  harness compare DIR                            the hosts of one `hosts:` sweep
  harness compare DIR --image 20.12 --image 22.12   two images of one directory
  harness compare FIT_A FIT_B                    two `harness fit` directories

exit codes:
  0  no compared cell is bad on either side (fits: B fits as much as A)
  1  a cell is bad on either side, even where both sides agree ("no differences
     in verdict": a leak on both hosts is still a leak) or where only one side has
     it; fits: B fits less than A, by more than one step
  2  bad input: a directory that is not a results directory, the same directory
     twice (but one of a `hosts:` sweep), two sides that share no cell, an --image
     or --host that is not there
  4  no cell is bad, but a side has cells that give no answer (unreadable, stale:
     run since the matrix changed, or not run): each is named, with the command
     that runs it again
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser("compare", help="join two results directories and show differences",
                       formatter_class=FittedHelpFormatter,
                       epilog=COMPARE_EPILOG)
    p.add_argument("a", type=Path, help="results directory (reports/<name>/<timestamp>)")
    p.add_argument("b", type=Path, nargs="?",
                   help="second results directory (default: A again, with --image twice)")
    p.add_argument("--image", action="append", default=[], metavar="IMAGE",
                   help="compare IMAGE (label or full reference) of A with the second "
                        "--image of B (or of A)")
    p.add_argument("--host", action="append", default=[], metavar="HOST",
                   help="with one directory of a `hosts:` sweep: compare host HOST (the "
                        "old one) with the second --host (default: the matrix's first "
                        "host with each of the others, in its order)")
    options.add(p, "width", "quiet")
    options.add(p, "format")
    p.set_defaults(func=run)


@answer.answers("compare", {"verdicts": [], "fits": []})
def run(args: argparse.Namespace) -> int:
    options.check(args)
    missing(asked(args))
    fits = fit_rows(args.a) if not args.image else None
    if fits is not None:
        return compare_fit_dirs(args, fits)
    comparisons, where = results_compared(asked(args))
    return show(comparisons, where, args.width)


def asked(args: argparse.Namespace) -> Asked:
    """What the command line asks compare."""
    return Asked(args.a, args.b, tuple(args.image), tuple(args.host))


def compare_fit_dirs(args: argparse.Namespace, fits: list[Row]) -> int:
    """Two hosts' `harness fit` runs (or one over a hosts: matrix): the boundaries.

    Raises:
        InputError: one fit directory of one host, or a --host that is not in it.
    """
    param = param_of(args.a)
    other = fit_rows(args.b) if args.b is not None and \
        args.b.resolve() != args.a.resolve() else None
    if other is not None:
        return shown_fits(compare_fits(fits, other, names(args.a, args.b), param))
    hosts = list(dict.fromkeys(str(r.get("host")) for r in fits))
    if not args.host:
        one_directory(asked(args), [h for h in hosts if h != "None"])
    pick = args.host or hosts[:2]
    if len(pick) != 2 or any(h not in hosts for h in pick):
        raise InputError(f"{args.a}: a fit over host(s) {', '.join(hosts)}; compare needs "
                         "a second fit directory, or --host A --host B of these")
    return shown_fits(compare_fits([r for r in fits if r.get("host") == pick[0]],
                                   [r for r in fits if r.get("host") == pick[1]],
                                   (pick[0], pick[1]), param))


def shown_fits(found: FitComparison) -> int:
    """The boundaries side by side, or in JSON mode their rows; 1 when B fits less."""
    if answer.active():
        answer.update(fits=[found.to_json()])
    else:
        sys.stdout.write(found.text())
    return found.exit_code


def show(comparisons: list[Comparison], where: str, width: int | None = None) -> int:
    """Each comparison rendered within `width`; exit 1 when a compared cell is bad on
    either side (even where both agree), else 4 when a side has cells with no answer.

    Raises:
        InputError: two sides that share no cell.
    """
    for c in comparisons:
        if not c.joined and not c.incomplete:   # a side's stale cells are said below
            raise InputError(f"{where}: {c.a_name} and {c.b_name} share no "
                             f"({', '.join(c.key_names)}): nothing to compare\n"
                             "  fix: sweep the same matrix on both hosts")

    if answer.active():
        answer.update(verdicts=[comparison_json(c) for c in comparisons])
    for i, c in enumerate(comparisons if not answer.active() else ()):
        if len(comparisons) > 1:
            sys.stdout.write(("\n" if i else "") + f"== {c.a_name} (old) vs {c.b_name} ==\n")
        c.render(sys.stdout, console_width(sys.stdout, width))
    if any(c.any_bad for c in comparisons):
        return EXIT_REGRESSION
    return (EXIT_UNDECIDED if any(c.incomplete or c.undecided for c in comparisons)
            else EXIT_OK)


def comparison_json(c: Comparison) -> dict[str, object]:
    """A comparison in JSON mode: its joined pairs, sentences, gaps and fixes."""
    pairs = []
    for p in c.pairs:
        sa = p.a.summary.median_step_s if p.a is not None else None
        sb = p.b.summary.median_step_s if p.b is not None else None
        pairs.append({"key": list(p.key), "differs": p.differs,
                      "a": answer.cell_ref(p.a), "b": answer.cell_ref(p.b),
                      "step_ratio": sb / sa if sa and sb else None})
    return {"mode": c.mode, "a": c.a_name, "b": c.b_name, "keys": list(c.key_names),
            "same_host": c.same_host, "pairs": pairs, "differences": c.sentences(),
            "gaps": {"a": dict(c.gaps[0]), "b": dict(c.gaps[1])}, "fixes": list(c.fixes),
            "any_bad": c.any_bad, "incomplete": c.incomplete}
