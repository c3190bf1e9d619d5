"""`harness images build|list`: the offline CPU test images."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness import devtools
from harness.cli import options, printer
from harness.errors import EXIT_OK, EXIT_REGRESSION, InputError
from harness.runtimes import get_runtime


def add_parser(sub: Any) -> None:
    p = sub.add_parser("images", help="build or list the offline test images",
                       description="Build or list the offline CPU test images "
                                   "(images/images.yaml).")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    b = actions.add_parser("build", help="build the test images that are out of date",
                           description="Build the offline CPU test images whose recipe "
                                       "changed (cached by recipe hash).")
    b.add_argument("names", nargs="*", help="recipe names (default: all)")
    b.add_argument("--force", action="store_true", help="rebuild even if up to date")
    b.add_argument("--check", action="store_true",
                   help="build nothing: exit 1 if an image is out of date, 0 if none is")
    lst = actions.add_parser("list", help="list the recipes and their image tags",
                             description="List the recipes in images/images.yaml.")
    for q in (b, lst):
        q.add_argument("--recipes", type=Path, default=None,
                       help="recipes file (default: images/images.yaml here, else harness's "
                            "own)")
        options.add(q, "quiet")
        q.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    options.check(args)
    recipes = devtools.load_recipes(devtools.recipes_file(args.recipes))
    if args.action == "list":
        for r in recipes.values():
            extra = f" from {r.base} + {' '.join(r.pip)}" if r.base else f" ({r.script})"
            print(f"{r.name}: {r.tag}{extra}")
        return EXIT_OK

    if args.check:
        if args.force:
            raise InputError("--check builds nothing: leave out --force")
        engine = get_runtime("docker")
        todo = devtools.out_of_date(recipes, args.names, engine, printer(args.quiet),
                                    doing="out of date")
        print(f"{len(todo)} image(s) out of date: "
              f"{', '.join(r.tag for r, _ in todo) or 'none'}")
        return EXIT_REGRESSION if todo else EXIT_OK
    built = devtools.build(recipes, args.names, printer(args.quiet), force=args.force)
    print(f"built {len(built)} image(s): {', '.join(built) or 'all up to date'}")
    return EXIT_OK
