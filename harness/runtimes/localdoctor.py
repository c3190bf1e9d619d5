"""`harness doctor` for a local matrix: what the sweep needs from this machine.

Each image's interpreter exists and runs; its `pip:` pins resolve (a dry run of pip,
no install: `pip install --dry-run`, pip >= 22.2; where a sweep already installed them
into its cached venv, that venv says so without asking the index); the results directory can be
written (`harness.cli.doctor` adds that every scenario compiles). Each check is one
line with its fix, as the Docker and Slurm doctors give theirs.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from harness.matrixfile.lockfile import requirement_lines
from harness.matrixfile.model import ImageSpec, Matrix
from harness.runtimes import process, resolver
from harness.runtimes.base import Check
from harness.runtimes.local import LocalRuntime, cache_dir, venv_dirs
from harness.runtimes.piperrors import short_pip_error

RESOLVE_TIMEOUT_S = 120.0


def interpreter(image: ImageSpec) -> str:
    """The interpreter a local image runs (or builds its venv with)."""
    return image.python or (image.ref if not image.pip else sys.executable)


def built(image: ImageSpec, version: str) -> Path | None:
    """The sweep's cached venv of an undated image's pins (`LocalRuntime.prepare`'s key:
    the interpreter's sys.version and the pins), None where no sweep built it."""
    for venv in venv_dirs(cache_dir(), version, sorted(image.pip),
                          requirement_lines(image.hashes)):
        if (venv / "bin" / "python").exists():
            return venv
    return None


def _image_checks(image: ImageSpec) -> Iterator[Check]:
    name = interpreter(image)
    found = shutil.which(name) if os.sep not in name else (
        name if os.access(name, os.X_OK) else None)
    if found is None:
        yield ("FAIL", f"image {image.label}: interpreter {name!r} not found",
               "install it, or name an existing one in the image's `python:`")
        return
    # the runtime's own probe: its sys.version is the one a cached venv's key holds
    rc, _, version, _ = process.python_probe(found)
    if rc != 0:
        yield ("FAIL", f"image {image.label}: interpreter {found} does not run: "
                       f"{version[-200:]}", "install it, or name another interpreter")
        return
    yield ("ok", f"image {image.label}: Python {version.split()[0]} ({found})", "")
    if not image.pip:
        return
    if image.as_of:
        yield _dated_check(image)
        return
    venv = built(image, version)
    if venv is not None:    # a sweep installed them: no index asked again
        yield ("ok", f"image {image.label}: pins installed ({' '.join(image.pip)}; cached "
                     f"venv {venv})", "")
        return
    rc, out = process.check_output(
        [found, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed",
         "--disable-pip-version-check", *image.pip], timeout=RESOLVE_TIMEOUT_S)
    if rc == 0:
        yield ("ok", f"image {image.label}: pins resolve ({' '.join(image.pip)})", "")
    elif rc == 124:     # time-boxed: a slow or unreachable index is not a wrong pin
        yield ("warn", f"image {image.label}: pins not checked: pip found no answer from "
                       f"its index in {RESOLVE_TIMEOUT_S:.0f} s",
               "check the index pip uses (pip config list) answers from this host")
    elif "no such option: --dry-run" in out:
        yield ("warn", f"image {image.label}: pip of {found} is too old to check pins "
                       "without installing them", f"{found} -m pip install -U pip")
    else:
        yield ("FAIL", f"image {image.label}: pins do not resolve: "
                       f"{short_pip_error(out.splitlines())}",
               "check that these versions exist for this Python (and the index pip uses)")


def _dated_check(image: ImageSpec) -> Check:
    """A dated image's requirements resolved as of its day: the sweep's own resolution
    (`LocalRuntime.pins`, kept in the cache under the same key)."""
    try:
        pins = LocalRuntime().pins(image)
    except resolver.ResolveError as exc:
        problem, _, fix = str(exc).partition("\n  fix: ")
        return ("FAIL", problem, fix)
    return ("ok", f"image {image.label}: {' '.join(image.pip)} resolves as of "
                  f"{image.as_of} to {len(pins)} pins", "")


def _writable(out: Path) -> Check:
    probe = out
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:   # access() says yes to root everywhere, /proc included: try it
        fd, name = tempfile.mkstemp(dir=probe, prefix=".harness-doctor")
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        return ("FAIL", f"results directory {out}: cannot be written ({probe}: "
                        f"{exc.strerror})", "pass --out DIR you can write")
    return ("ok", f"results directory {out}: writable", "")


def local_checks(matrix: Matrix, out: Path) -> Iterator[Check]:
    """Every check of a local matrix, in order."""
    for image in matrix.images:
        yield from _image_checks(image)
    yield _writable(out)
