"""`harness images build`: the offline CPU test images of `images/images.yaml`, cached by tag
and recipe hash (developer tooling; no sweep imports it). Containers have no network, so
packages are `pip install --target`ed on the host (same Python minor), COPYed onto the
debootstrapped base with `.pyc`s baked in, so `--rm` runs do not recompile.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.errors import ImageUnavailable, InputError
from harness.runtimes import get_runtime, process
from harness.runtimes.base import Progress
from harness.runtimes.local import cache_dir

RECIPE_LABEL = "harness.recipe"


@dataclass(frozen=True)
class Recipe:
    name: str
    tag: str
    script: Path | None = None        # shell recipe (the debootstrap base)
    base: str | None = None           # name of the recipe this one builds FROM
    pip: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    python: str | None = None         # interpreter for `pip install --target` (default: ours)

    def digest(self, recipes: dict[str, Recipe]) -> str:
        parts: list[Any] = [self.tag, list(self.pip), list(self.env)]
        if self.python is not None:
            parts.append(self.python)
        if self.script is not None:
            parts.append(self.script.read_text(encoding="utf-8"))
        if self.base is not None:
            parts.append(recipes[self.base].digest(recipes))
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def recipes_file(given: Path | None) -> Path:
    """`--recipes`, else images/images.yaml here, else harness's own (any directory works)."""
    if given is not None:
        return given
    here = Path("images/images.yaml")
    own = Path(__file__).resolve().parents[1] / here
    return here if here.is_file() or not own.is_file() else own


def load_recipes(path: Path) -> dict[str, Recipe]:
    """Read images.yaml.

    Raises:
        InputError: unreadable file, unknown key or base.
    """
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"{path}: cannot read recipes: {exc}\n  fix: pass --recipes "
                         "with the path of a recipes file, or none for harness's own "
                         "images/images.yaml") from exc
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of image name -> recipe")
    out: dict[str, Recipe] = {}
    for name, raw in data.items():
        if not isinstance(raw, dict) or "tag" not in raw:
            raise InputError(f"{path}: {name}: a recipe is a mapping with at least `tag`")
        unknown = set(raw) - {"tag", "script", "from", "pip", "env", "python"}
        if unknown:
            raise InputError(f"{path}: {name}: unknown keys {sorted(unknown)}; allowed: tag, "
                             "script, from, pip, env, python")
        script = path.parent / raw["script"] if "script" in raw else None
        out[str(name)] = Recipe(str(name), str(raw["tag"]), script, raw.get("from"),
                                tuple(str(p) for p in raw.get("pip", [])),
                                tuple((str(k), str(v)) for k, v in (raw.get("env") or {}).items()),
                                str(raw["python"]) if "python" in raw else None)
    for r in out.values():
        if r.base is not None and r.base not in out:
            raise InputError(f"{path}: {r.name}: from {r.base!r} is not a recipe here")
    return out


def build(recipes: dict[str, Recipe], names: list[str], progress: Progress,
          force: bool = False, jobs: int = 2, engine: Any = None) -> list[str]:
    """Build the named recipes and their bases (tags whose recipe label matches skipped),
    `jobs` contexts at a time, each image as soon as its base is ready, so chains overlap.

    Raises: InputError: an unknown recipe name; ImageUnavailable: the first recipe (in build
    order) that failed, once the rest are built.
    """
    if engine is None:
        engine = get_runtime("docker")      # docker-py loads here, paramiko hidden
    todo = out_of_date(recipes, names, engine, progress, force)
    running: process.Running = set()

    def said_by(r: Recipe) -> Progress:
        return lambda text: progress(f"{r.name}: {text}")

    contexts = ThreadPoolExecutor(max(1, jobs), thread_name_prefix="image-context")
    images = ThreadPoolExecutor(max(1, len(todo)), thread_name_prefix="image-build")
    made: dict[str, Future[None]] = {}
    try:
        ready = {r.name: contexts.submit(_context, r, digest, said_by(r), running)
                 for r, digest in todo if r.script is None}
        for r, digest in todo:
            made[r.name] = images.submit(_image, engine, r, recipes, digest,
                                         made.get(r.base or ""), ready.get(r.name),
                                         said_by(r), running)
        failed: list[ImageUnavailable] = []
        for future in made.values():    # what stands on no failed base is still built
            try:
                future.result()
            except ImageUnavailable as exc:
                failed.append(exc)
        if failed:
            raise failed[0]
    except BaseException:
        process.kill_all(running)
        raise
    finally:
        contexts.shutdown(wait=True, cancel_futures=True)
        images.shutdown(wait=True, cancel_futures=True)
    return [r.tag for r, _ in todo]


def out_of_date(recipes: dict[str, Recipe], names: list[str], engine: Any,
                progress: Progress, force: bool = False,
                doing: str = "building") -> list[tuple[Recipe, str]]:
    """The named recipes and their bases (in build order) whose image on `engine` is
    missing or was built from another recipe, each with its recipe's digest (all of them
    with `force`); each is said up to date or `doing`."""
    order = _order(recipes, names)
    todo: list[tuple[Recipe, str]] = []
    for i, name in enumerate(order, 1):
        r = recipes[name]
        digest = r.digest(recipes)
        if not force and _up_to_date(r, digest, engine):
            progress(f"[{i}/{len(order)}] {r.tag}: up to date")
            continue
        progress(f"[{i}/{len(order)}] {r.tag}: {doing}")
        todo.append((r, digest))
    return todo


def _up_to_date(r: Recipe, digest: str, engine: Any) -> bool:
    """Whether `r`'s image is there, built from this recipe: by its label, or for a
    shell recipe by the script's own check (it hashes what it reads; RECIPE_CHECK=1
    makes it exit 0 for up to date, 1 for not, building nothing)."""
    if r.script is None:
        labels = engine.image_labels(r.tag)
        return labels is not None and labels.get(RECIPE_LABEL) == digest
    rc, _ = process.check_output(["bash", str(r.script), r.tag], timeout=60,
                                 env={**os.environ, "RECIPE_CHECK": "1"})
    return rc == 0


def _order(recipes: dict[str, Recipe], names: list[str]) -> list[str]:
    """The named recipes (all when none) with their bases, each after its base."""
    order: list[str] = []

    def visit(name: str) -> None:
        if name not in recipes:
            raise InputError(f"no image recipe {name!r}; known: {', '.join(recipes)}")
        base = recipes[name].base
        if base is not None:
            visit(base)
        if name not in order:
            order.append(name)

    for n in names or list(recipes):
        visit(n)
    return order


def _image(engine: Any, r: Recipe, recipes: dict[str, Recipe], digest: str,
           base: Future[None] | None, context: Future[Path] | None, progress: Progress,
           running: process.Running) -> None:
    """Build one image once what it stands on is there: its base image, its context."""
    if base is not None:
        base.result()   # a failed base fails this one too
    if r.script is not None:
        rc = process.stream_lines(["bash", str(r.script), r.tag], on_line=progress,
                                  running=running)
        if rc != 0:
            raise ImageUnavailable(f"{r.script} failed with exit code {rc}")
        return
    assert r.base is not None and context is not None
    ctx = context.result()
    env_lines = "".join(f"ENV {k}={json.dumps(v)}\n" for k, v in r.env)
    (ctx / "Dockerfile").write_text(
        f"FROM {recipes[r.base].tag}\nCOPY site /opt/harness-site\n"
        f"ENV PYTHONPATH=/opt/harness-site\n{env_lines}")
    engine.build(ctx, r.tag, {RECIPE_LABEL: digest, "harness.pip": " ".join(r.pip)}, progress)
    progress(f"built {r.tag}")


def _context(r: Recipe, digest: str, progress: Progress,
             running: process.Running) -> Path:
    """A pip recipe's build context (`--target` install, compiled), cached by recipe hash.

    Raises:
        ImageUnavailable: pip failed, or the recipe's interpreter is not here.
    """
    ctx = cache_dir() / "image-contexts" / f"{r.name}-{digest}"
    site = ctx / "site"
    if (ctx / ".complete").exists():
        return ctx
    shutil.rmtree(ctx, ignore_errors=True)
    site.mkdir(parents=True)
    python = _interpreter(r)
    progress(f"pip install --target ({' '.join(r.pip)}) ...")
    tail: list[str] = []
    rc = process.stream_lines(
        [python, "-m", "pip", "install", "--no-compile", "--disable-pip-version-check",
         "--progress-bar", "off", "--target", str(site), *r.pip],
        on_line=tail.append, running=running)
    if rc != 0:
        raise ImageUnavailable(f"{r.name}: pip install failed:\n" + "\n".join(tail[-10:]))
    progress("compiling .pyc ...")
    process.check_output([python, "-m", "compileall", "-q", "-j", "0",
                          "--invalidation-mode", "unchecked-hash", str(site)], timeout=1800)
    (ctx / ".complete").write_text("ok")
    return ctx


def _interpreter(r: Recipe) -> str:
    """The Python that installs a recipe's packages: its minor must match the image's.

    Raises:
        ImageUnavailable: the recipe names an interpreter this machine lacks.
    """
    if r.python is None:
        return sys.executable
    path = Path(os.path.expanduser(r.python))
    if not os.access(path, os.X_OK):
        raise ImageUnavailable(f"{r.name}: recipe needs Python {r.python} for `pip install "
                               "--target` and it is not here.\n  fix: build it (e.g. `pyenv "
                               "install 3.7`) or edit `python:` in images/images.yaml")
    return str(path)
