"""`harness images build|list`: the offline CPU test images."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from harness.errors import EXIT_OK


def add_parser(sub: Any) -> None:
    p = sub.add_parser("images", help="build or list the offline test images")
    p.add_argument("action", choices=("build", "list"))
    p.add_argument("names", nargs="*", help="recipe names (default: all)")
    p.add_argument("--recipes", type=Path, default=Path("images/images.yaml"))
    p.add_argument("--force", action="store_true", help="rebuild even if up to date")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from harness import images

    recipes = images.load_recipes(args.recipes)
    if args.action == "list":
        for r in recipes.values():
            extra = f" from {r.base} + {' '.join(r.pip)}" if r.base else f" ({r.script})"
            print(f"{r.name}: {r.tag}{extra}")
        return EXIT_OK

    def progress(text: str) -> None:
        print(f"harness: {text}", file=sys.stderr, flush=True)

    built = images.build(recipes, args.names, progress, force=args.force)
    print(f"built {len(built)} image(s): {', '.join(built) or 'all up to date'}")
    return EXIT_OK
