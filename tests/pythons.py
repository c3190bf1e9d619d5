"""The Python interpreters this machine has besides the running one (pyenv's builds),
found from pyenv's root rather than a path written down: tests of the stdlib-only agent
run it on each, and benchmarks/busy_rounds.py sweeps two of them."""

from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path


def _pyenv_root() -> Path | None:
    root = os.environ.get("PYENV_ROOT")
    if root:
        return Path(root)
    pyenv = shutil.which("pyenv")      # <root>/bin/pyenv, or <root>/libexec/pyenv
    return Path(os.path.realpath(pyenv)).parent.parent if pyenv else None


def pythons(minor: int) -> list[str]:
    """pyenv's interpreters of Python 3.minor (the real files, not shims), oldest patch
    release first; [] where pyenv is absent or has none."""
    root = _pyenv_root()
    if root is None:
        return []
    found = glob.glob(str(root / "versions" / f"3.{minor}.*" / "bin" / f"python3.{minor}"))
    return sorted(found, key=lambda p: _patch(Path(p).parents[1].name))


def _patch(version: str) -> int:
    """3.6.15 -> 15 (0 where it is not a number: 3.13.0t's free-threaded build)."""
    patch = version.split(".")[2]
    return int(patch) if patch.isdigit() else 0
