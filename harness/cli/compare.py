"""`harness compare A B`: where two hosts' results differ; `compare DIR`: the hosts of one
`hosts:` sweep, each against the first; `--image X --image Y`: two images."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from harness.answers.hostcompare import compare_hosts, compare_images
from harness.cli import answer, options
from harness.cli.helptext import FittedHelpFormatter
from harness.cli.report import unchecked_note
from harness.errors import EXIT_OK, EXIT_REGRESSION, EXIT_UNDECIDED, InputError
from harness.fit.compare import FitComparison, compare_fits, fit_rows, param_of
from harness.report.grid import console_width
from harness.store.gate import STALE, read_gated
from harness.store.runs import SWEEP_RESULTS, require

if TYPE_CHECKING:
    from harness.answers.hostcompare import Comparison
    from harness.fit.compare import Row
    from harness.result.model import CellResult
    from harness.store.gate import Gated


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
    answer.add(p)
    p.set_defaults(func=run)


def host_order(path: Path, results: dict[str, CellResult]) -> list[str]:
    """The `hosts:` labels of a results directory, in the matrix's order (its copy in
    the directory), else in the order of the cells."""
    found: list[str] = []
    for r in sorted(results.values(), key=lambda r: r.id):
        if r.host.label and r.host.label not in found:
            found.append(r.host.label)
    try:
        top = yaml.safe_load((path / "matrix.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return found
    hosts = top.get("hosts") if isinstance(top, dict) else None
    named = [h.get("name") if isinstance(h, dict) else None for h in hosts or []]
    ordered = [n for n in named if isinstance(n, str) and n in found]
    return ordered + [h for h in found if h not in ordered]


def split_hosts(path: Path, results: dict[str, CellResult], wanted: list[str]
                ) -> list[tuple[dict[str, CellResult], dict[str, CellResult], tuple[str, str]]]:
    """Host against host of one `hosts:` sweep: the two `wanted`, else the matrix's
    first host (the old one) against each of the others in turn.

    Raises:
        InputError: fewer than two hosts, or a --host that is not one of them.
    """
    hosts = host_order(path, results)
    if len(wanted) not in (0, 2):
        raise InputError(f"--host given {len(wanted)} time(s); give it twice, e.g. "
                         f"--host {' --host '.join(hosts[:2]) or 'old --host new'}")
    for name in wanted:
        if name not in hosts:
            raise InputError(f"--host {name}: no such host in {path} (allowed values: "
                             f"{', '.join(hosts) or 'none: not a hosts: sweep'})")
    if len(wanted or hosts) < 2:
        raise InputError(f"{path} holds one host's cells ({', '.join(hosts) or 'local'}); "
                         "compare needs two results directories (A B), a `hosts:` sweep, "
                         "or one directory with --image X --image Y")
    pairs = [(wanted[0], wanted[1])] if wanted else [(hosts[0], h) for h in hosts[1:]]

    def on(host: str) -> dict[str, CellResult]:
        return {k: r for k, r in results.items() if r.host.label == host}

    return [(on(old), on(new), (old, new)) for old, new in pairs]


def results_of(path: Path, flag: str) -> dict[str, CellResult]:
    """The current cells of a results directory (through the gate, `store.gate`); the
    others are kept for `gaps_of`.

    Raises:
        InputError: not a sweep's results directory (a bisect's: the message names the
            command that reads it), or one that holds no cell results.
    """
    require(path, SWEEP_RESULTS, "harness compare", flag)
    found, _ = read_gated(path, as_run=True)
    if not found.results and not found.was and not found.unreadable:
        raise InputError(f"{flag} {path}: no cells/*/result.json here; pass a directory "
                         "written by `harness sweep`")
    unchecked_note(found)
    _READ[path] = found
    return found.results


_READ: dict[Path, Gated] = {}   # what `results_of` read, for `gaps_of`


def gaps_of(path: Path, image: str | None = None) -> tuple[dict[str, str], list[str]]:
    """A directory's planned cells that give no answer (cell id -> unreadable, stale:
    why, not run), of `image` only where given, and the command that runs them again."""
    found = _READ[path]
    ids = [p.id for p in found.plan if image is None or p.image == image]
    gaps = {cid: ("stale: " + found.stale[cid] if found.state(cid) == STALE
                  else found.state(cid).replace("missing", "not run"))
            for cid in ids if cid not in found.results}
    return gaps, [f"{found.refresh} runs {path}'s again"] if gaps else []


def image_label(name: str, results: dict[str, CellResult], where: Path) -> str:
    """The image label `name` means: a label, or an image's full reference
    (nvcr.io/nvidia/tensorflow:22.12-tf1-py3).

    Raises:
        InputError: no image of `results` has that label or reference.
    """
    refs = {r.image.label: r.image.ref for r in results.values()}
    if name in refs:
        return name
    for label, ref in refs.items():
        if name == ref:
            return label
    found = _READ.get(where)
    planned = ({p.image for p in found.plan} | {r.image.label for r in found.was.values()}
               if found is not None else set())
    if found is not None and name in planned:
        # Its cells are there, but none is current: say which and why, not "no such"
        gaps, fix = gaps_of(where, name)
        why = "; ".join(f"{cid}: {g}" for cid, g in sorted(gaps.items())) or "no cell"
        raise InputError(f"--image {name}: no current cell of it in {where} ({why})"
                         + (f"\n  fix: {fix[0]}" if fix else ""))
    allowed = sorted(set(refs) | planned)
    raise InputError(f"--image {name}: no such image in {where} (allowed values: "
                     f"{', '.join(allowed) or 'none'}, or their full references)")


def run_name(path: Path) -> str:
    """NAME/TIMESTAMP of a results directory: what tells two runs apart."""
    full = path.resolve()
    return f"{full.parent.name}/{full.name}" if full.parent.name else full.name


@answer.answers("compare", {"verdicts": [], "fits": []})
def run(args: argparse.Namespace) -> int:
    options.check(args)
    fits = fit_rows(args.a) if not args.image else None
    if fits is not None:
        return compare_fit_dirs(args, fits)
    comparisons, where = results_compared(args)
    return show(comparisons, where, args.width)


def _one_directory(args: argparse.Namespace, hosts: list[str]) -> None:
    """`compare A A`: one directory, which compares only where it holds two hosts.

    Raises:
        InputError: A and B are one directory of one host.
    """
    twice = args.b is not None and args.b.resolve() == args.a.resolve() and not args.image
    if twice and len(hosts) < 2:
        raise InputError(
            f"{args.a} and {args.b} are one directory (the cells of one host: "
            f"{', '.join(hosts) or 'local'}): nothing to compare\n  fix: pass two "
            "results directories (A B), or one directory with --image X --image Y")


def _names(a: Path, b: Path) -> tuple[str, str]:
    """What tells two runs apart: NAME/TIMESTAMP, else their full paths."""
    names = (run_name(a), run_name(b))
    return names if names[0] != names[1] else (str(a.resolve()), str(b.resolve()))


def compare_fit_dirs(args: argparse.Namespace, fits: list[Row]) -> int:
    """Two hosts' `harness fit` runs (or one over a hosts: matrix): the boundaries.

    Raises:
        InputError: one fit directory of one host, or a --host that is not in it.
    """
    param = param_of(args.a)
    other = fit_rows(args.b) if args.b is not None and \
        args.b.resolve() != args.a.resolve() else None
    if other is not None:
        return shown_fits(compare_fits(fits, other, _names(args.a, args.b), param))
    hosts = list(dict.fromkeys(str(r.get("host")) for r in fits))
    if not args.host:
        _one_directory(args, [h for h in hosts if h != "None"])
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


def results_compared(args: argparse.Namespace) -> tuple[list[Comparison], str]:
    """Two images (--image twice), the hosts of one `hosts:` sweep (the first the old
    one), or two directories, compared; and what they are, for the error of two sides
    that share no cell.

    Raises:
        InputError: --image not given twice, an image or host that is not there,
            --host with two directories.
    """
    a = results_of(args.a, "A")
    if args.image:
        if len(args.image) != 2:
            raise InputError(f"--image given {len(args.image)} time(s); give it twice, e.g. "
                             "--image 20.12-tf1-py3 --image 22.12-tf1-py3")
        b = results_of(args.b, "B") if args.b else a
        labels = [image_label(name, results, where) for name, results, where in
                  ((args.image[0], a, args.a), (args.image[1], b, args.b or args.a))]
        got = compare_images(a, b, labels[0], labels[1])
        (ga, fa), (gb, fb) = gaps_of(args.a, labels[0]), gaps_of(args.b or args.a, labels[1])
        got.gaps, got.fixes = (ga, gb), list(dict.fromkeys(fa + fb))
        return [got], f"{args.a} and {args.b or args.a}"
    if args.b is None or args.b.resolve() == args.a.resolve() or args.host:
        if args.b is not None and args.b.resolve() != args.a.resolve():
            raise InputError("--host picks two hosts of one directory; with two "
                             "directories, leave it out")
        if not args.host:
            _one_directory(args, host_order(args.a, a))
        out = [compare_hosts(old, new, hosts)
               for old, new, hosts in split_hosts(args.a, a, args.host)]
        for c in out:
            gaps, c.fixes = gaps_of(args.a)
            c.gaps = (gaps, {})
        return out, f"{args.a}"
    both = compare_hosts(a, results_of(args.b, "B"), _names(args.a, args.b))
    (ga, fa), (gb, fb) = gaps_of(args.a), gaps_of(args.b)
    both.gaps, both.fixes = (ga, gb), fa + fb
    return [both], f"{args.a} and {args.b}"


def show(comparisons: list[Comparison], where: str, width: int | None = None) -> int:
    """Each comparison rendered (a heading for each when there are several), its table
    within `width` (else the terminal's, else $COLUMNS); exit 1 when a compared cell is
    bad on either side, even where the two sides agree.

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
    return EXIT_UNDECIDED if any(c.incomplete for c in comparisons) else EXIT_OK


def comparison_json(c: Comparison) -> dict[str, object]:
    """A comparison in JSON mode, from what its table and sentences are made of: each
    joined pair (`*` in the table: `differs`), the sentences, and each side's cells that
    give no answer with the commands that run them again."""
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
