"""`harness compare A B`: where two hosts' results differ; `--image X --image Y`: two images."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import EXIT_OK, EXIT_REGRESSION, InputError

if TYPE_CHECKING:
    from harness.result.model import CellResult


def add_parser(sub: Any) -> None:
    p = sub.add_parser("compare", help="join two results directories and show differences")
    p.add_argument("a", type=Path, help="results directory (reports/<name>/<timestamp>)")
    p.add_argument("b", type=Path, nargs="?",
                   help="second results directory (default: A again, with --image twice)")
    p.add_argument("--image", action="append", default=[], metavar="IMAGE",
                   help="compare IMAGE (label or full reference) of A with the second "
                        "--image of B (or of A)")
    p.set_defaults(func=run)


def results_of(path: Path, flag: str) -> dict[str, CellResult]:
    """The finished cells of a results directory.

    Raises:
        InputError: the directory holds no cell results.
    """
    from harness.report import load_results

    results = load_results(path)
    if not results:
        raise InputError(f"{flag} {path}: no cells/*/result.json here; pass a directory "
                         "written by `harness sweep`")
    return results


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
    raise InputError(f"--image {name}: no such image in {where} (allowed values: "
                     f"{', '.join(sorted(refs))}, or their full references)")


def run_name(path: Path) -> str:
    """NAME/TIMESTAMP of a results directory: what tells two runs apart."""
    full = path.resolve()
    return f"{full.parent.name}/{full.name}" if full.parent.name else full.name


def run(args: argparse.Namespace) -> int:
    from harness.answers.hostcompare import compare_hosts, compare_images

    a = results_of(args.a, "A")
    if args.image:
        if len(args.image) != 2:
            raise InputError(f"--image given {len(args.image)} time(s); give it twice, e.g. "
                             "--image 20.12-tf1-py3 --image 22.12-tf1-py3")
        b = results_of(args.b, "B") if args.b else a
        labels = [image_label(name, results, where) for name, results, where in
                  ((args.image[0], a, args.a), (args.image[1], b, args.b or args.a))]
        comparison = compare_images(a, b, labels[0], labels[1])
    else:
        if args.b is None:
            raise InputError("compare needs two results directories (A B), or one with "
                             "--image X --image Y")
        b = results_of(args.b, "B")
        names = (run_name(args.a), run_name(args.b))
        if names[0] == names[1]:
            names = (str(args.a.resolve()), str(args.b.resolve()))
        comparison = compare_hosts(a, b, names)
    if not comparison.joined:
        raise InputError(f"{args.a} and {args.b or args.a} share no "
                         f"({', '.join(comparison.key_names)}): nothing to compare\n"
                         "  fix: sweep the same matrix on both hosts")
    comparison.render(sys.stdout)
    return EXIT_REGRESSION if comparison.any_bad else EXIT_OK
