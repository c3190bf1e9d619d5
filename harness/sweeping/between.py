"""`harness sweep --between OLD NEW`: two lock files swept as one row's images (OLD the
baseline), written as a matrix file so later commands read the run as any sweep's."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from harness import matrixfile
from harness.errors import InputError
from harness.matrixfile.entries import to_word
from harness.matrixfile.lockfile import normal, read
from harness.matrixfile.model import abilities

if TYPE_CHECKING:
    from harness.matrixfile.lockfile import Lock
    from harness.runtimes.base import Progress

MATRIX_FILE = "between.yaml"
# Top-level keys of a given matrix that the two locks' matrix keeps as they are.
KEPT = ("runtime", "defaults", "analysis", "slurm", "max-parallel", "fail-fast")
# Lock file stems that say nothing of which side a file is: its directory's name instead.
GENERIC = ("uv", "pylock", "requirements", "requirements-lock", "constraints")
USAGE = ("harness sweep --between OLD NEW --scenario FILE (or a matrix for its "
         "scenarios: harness sweep MATRIX --between OLD NEW)")


def matrix_file(pair: Sequence[Path] | None, given_scenarios: Sequence[Path] | None,
                python: str | None, matrix: Path | None, out: Path,
                progress: Progress) -> Path:
    """Write the matrix of `--between OLD NEW` (`pair`) under --out; its path.

    Raises:
        InputError: no --between, no scenario, a container runtime, or an unreadable lock.
    """
    if pair is None:
        raise InputError(f"{'--scenario' if given_scenarios else '--python'} goes with "
                         f"--between OLD NEW: {USAGE}")
    same_file(pair)
    old, new = (read(p) for p in pair)
    doc: dict[str, Any] = {}
    prefix = ""
    gpus: Any = None
    scenarios: list[Any] = [str(s.resolve()) for s in given_scenarios or ()]
    if matrix is not None:
        given = matrixfile.load(matrix)      # its own mistakes first, located
        if abilities(given.runtime).container_images:     # its images are no venvs
            raise InputError(f"{matrix}: runtime {given.runtime}: --between builds "
                             "each lock into a venv (`runtime: local`)\n  fix: drop "
                             "`runtime:` or set it to local, or sweep without the matrix")
        raw = yaml.safe_load(matrix.read_text(encoding="utf-8"))
        prefix = given.name
        doc = {k: raw[k] for k in KEPT if k in raw}
        gpus = raw["matrix"].get("gpu")
        if not scenarios:
            scenarios = [absolute(s, matrix.parent) for s in
                         (raw["matrix"]["scenario"] if isinstance(raw["matrix"]["scenario"],
                                                                  list)
                          else [raw["matrix"]["scenario"]])]
    if not scenarios:
        raise InputError(f"--between needs a scenario: {USAGE}")
    missing = [s for s in given_scenarios or () if not s.is_file()]
    if missing:
        raise InputError(f"--scenario {missing[0]}: no such file\n  fix: the path of a "
                         "Python file with setup(params) and step(state)")
    labels = names(pair)
    name = "-".join(filter(None, [prefix, "between", *run_words(labels)]))
    images: list[dict[str, Any]] = []
    for label, path in zip(labels, pair, strict=True):
        image: dict[str, Any] = {"name": label, "lock": str(path.resolve())}
        if python:
            image["python"] = python
        images.append(image)
    axes: dict[str, Any] = {"image": images}
    if gpus is not None:
        axes["gpu"] = gpus
    axes["scenario"] = scenarios
    body = {"name": name, **(doc if matrix is not None else {"runtime": "local"}),
            "matrix": axes, "baseline": {"image": labels[0]}}
    where = Path(out) / name / MATRIX_FILE
    where.parent.mkdir(parents=True, exist_ok=True)
    text = ("# written by `harness sweep --between`: the two locks as images, OLD first "
            "(the baseline)\n" + yaml.safe_dump(body, sort_keys=False))
    if not where.is_file() or where.read_text(encoding="utf-8") != text:
        where.write_text(text, encoding="utf-8")
    progress(f"between {labels[0]} and {labels[1]}: {differences(old, new)}")
    return where


def absolute(entry: Any, base: Path) -> Any:
    """A scenario entry with its script's path made absolute (the matrix lives in --out)."""
    if isinstance(entry, str):
        return str((base / entry).resolve())
    if isinstance(entry, dict) and isinstance(entry.get("script"), str):
        return {**entry, "script": str((base / entry["script"]).resolve())}
    return entry


def same_file(paths: Sequence[Path]) -> None:
    """Refuse OLD and NEW that are one file.

    Raises:
        InputError: the two paths name one file.
    """
    old, new = paths
    try:
        same = old.resolve() == new.resolve() or old.samefile(new)
    except OSError:
        return      # a file that cannot be read is said by the lock reader, named
    if same:
        raise InputError(f"--between {old} {new}: OLD and NEW are one file, so nothing "
                         "differs between the two sides\n  fix: give the lock of the "
                         "environment that was good first, then the one to check, e.g. "
                         "--between old/requirements.txt new/requirements.txt")


def names(paths: Sequence[Path]) -> list[str]:
    """The two images' labels: file stems, else directory names, else `-old`/`-new`."""
    def word(stem: str) -> str:
        return to_word(stem).strip("-") or "lock"

    def stem_of(path: Path) -> str:
        stem = path.resolve().name.split(".")[0] if path.name.startswith("pylock.") \
            else path.stem
        return path.resolve().parent.name if stem.lower() in GENERIC and \
            path.resolve().parent.name else stem

    out = [word(stem_of(p)) for p in paths]
    if out[0] == out[1]:
        dirs = [word(p.resolve().parent.name) for p in paths]
        out = dirs if dirs[0] != dirs[1] else [f"{out[0]}-old", f"{out[1]}-new"]
    return out


def run_words(labels: Sequence[str]) -> list[str]:
    """The words of the run's name after "between" (`req-old`, `req-new` -> req, old, new)."""
    a, b = labels
    if a.endswith("-old") and b.endswith("-new") and a[:-4] == b[:-4]:
        return [a[:-4], "old", "new"]
    return list(labels)


def differences(old: Lock, new: Lock) -> str:
    """The package changes from OLD's pins to NEW's, in words."""
    a = {normal(p.name): p.version for p in old.pins}
    b = {normal(p.name): p.version for p in new.pins}
    moved = [f"{n} {a.get(n, '(none)')} -> {b.get(n, '(none)')}"
             for n in sorted(a.keys() | b.keys()) if a.get(n) != b.get(n)]
    if not moved:
        return ("no package differs: both sides are one set of pins, so any difference "
                "the sweep finds is the host's noise")
    shown = ", ".join(moved[:8]) + (f", ... ({len(moved) - 8} more)" if len(moved) > 8
                                    else "")
    return (f"{len(moved)} package{' differs' if len(moved) == 1 else 's differ'}: "
            f"{shown}")
