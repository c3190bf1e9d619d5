"""A cell's run key: what its result depends on, so a stored result is reused only for the
same run (`key_of`: image, scenario and its local imports, params, settings, attribution,
runtime, host, GPU; `why_changed` compares). The image part is what is known before
preparing it, so a tag moved to a new digest is not seen.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.result.codec import JSON, as_json

if TYPE_CHECKING:
    from harness.matrixfile.model import Cell

BEFORE_KEYS = "recorded before keys"


@dataclass(frozen=True)
class ImageKey:
    """The image as the matrix names it: reference, pip pins (sorted), interpreter."""

    ref: str = ""
    pip: tuple[str, ...] = ()
    python: str | None = None
    as_of: str | None = None        # a dated image: the day its pip list was resolved


@dataclass(frozen=True)
class RunKey:
    """What a cell's result depends on, part by part."""

    image: ImageKey = field(default_factory=ImageKey)
    scenario: str = ""      # sha256 of the script and the local modules it imports
    params: dict[str, JSON] = field(default_factory=dict)
    settings: dict[str, JSON] = field(default_factory=dict)
    attribution: tuple[str, ...] = ()
    runtime: str = ""
    host: str = ""          # the host's label and URL, on the machine the harness ran on
    gpu: str = ""           # the matrix's GPU selection ("0", "all", "none", a UUID)


# Keyed only when set, so results recorded before these settings still answer.
ADDED_LATER = ("budget", "budget_calls", "overrun", "budget_max")
# Never keyed: follow from keyed lengths, or belong to no stored cell.
NOT_KEYED = ("asked_calls", "time_only")
# One look's params and settings as JSON, by the id of the scenario they are of (held).
Memo = dict[int, tuple[object, dict[str, JSON], dict[str, JSON]]]


def key_of(cell: Cell, runtime: str, attribution: tuple[str, ...] = (),
           hashed: dict[Path, str] | None = None, memo: Memo | None = None) -> RunKey:
    """The key of running `cell` now, on this machine, with `runtime`.

    `hashed` and `memo` cache each scenario's hash and JSON parts for a caller keying
    many cells at once."""
    made = memo.get(id(cell.scenario)) if memo is not None else None
    if made is None or made[0] is not cell.scenario:
        made = (cell.scenario, *_parts(cell))
        if memo is not None:    # holding the scenario: its id is not another's meanwhile
            memo[id(cell.scenario)] = made
    _, params, found = made
    return RunKey(
        image=ImageKey(cell.image.ref, tuple(sorted(cell.image.pip)), cell.image.python,
                       cell.image.as_of),
        scenario=(scenario_hash(cell.scenario.script) if hashed is None else
                  hashed.get(cell.scenario.script)
                  or hashed.setdefault(cell.scenario.script,
                                       scenario_hash(cell.scenario.script))),
        params=params, settings=found,
        attribution=tuple(attribution), runtime=runtime,
        host=f"{cell.host.label} {cell.host.url or ''} on {socket.gethostname()}",
        gpu=cell.gpu.value)


def _parts(cell: Cell) -> tuple[dict[str, JSON], dict[str, JSON]]:
    """The cell's params and run settings as a key holds them."""
    s = cell.settings
    settings = {f.name: (dict(getattr(s, f.name)) if f.name == "env" else getattr(s, f.name))
                for f in dataclasses.fields(s) if f.name not in NOT_KEYED
                and not (f.name in ADDED_LATER and getattr(s, f.name) is None)}
    params = as_json(dict(cell.scenario.params), "scenario.params")
    found = as_json(settings, "settings")
    assert isinstance(params, dict) and isinstance(found, dict)
    return params, found


_NAMES: dict[tuple[Path, bytes], tuple[tuple[Path, str], ...]] = {}  # a file's imports
_NAMES_LOCK = threading.Lock()


def scenario_hash(script: Path) -> str:
    """sha256 over the script and, transitively, the local modules it imports; a missing
    or unparsable file counts by its bytes or absence. Imports are parsed once per
    content."""
    root = script.parent
    digest = hashlib.sha256()
    seen: set[Path] = set()
    todo = [script]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        try:
            data = path.read_bytes()
        except OSError:
            data = b"(missing)"
        own = hashlib.sha256(data).digest()
        digest.update(f"{path.relative_to(root) if path.is_relative_to(root) else path}\0"
                      .encode() + own)
        with _NAMES_LOCK:
            names = _NAMES.get((path, own))
        if names is None:
            names = _imported(data, path, root)
            with _NAMES_LOCK:
                _NAMES[(path, own)] = names
        todo.extend(sorted(_local_files(names), reverse=True))
    return digest.hexdigest()


_AST_LOCK = threading.Lock()


def parse_source(data: bytes | str, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse` under a process lock: CPython < 3.11.8 raises SystemError when two
    threads parse at once (gh-106905), and a sweep's lanes do.

    Raises:
        SyntaxError, ValueError: as `ast.parse`.
    """
    with _AST_LOCK:
        return ast.parse(data, filename)


def _imported(data: bytes, path: Path, root: Path) -> tuple[tuple[Path, str], ...]:
    """(the folder a name is looked up in, the dotted name) of each import in `data`."""
    try:
        tree = parse_source(data)
    except (SyntaxError, ValueError):
        return ()
    names: list[tuple[Path, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend((root, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = root
            if node.level:
                base = path.parent
                for _ in range(node.level - 1):
                    base = base.parent
            module = node.module or ""
            names.extend((base, f"{module}.{a.name}" if module else a.name) for a in node.names)
            if module:
                names.append((base, module))
    return tuple(dict.fromkeys(names))


def _local_files(names: tuple[tuple[Path, str], ...]) -> list[Path]:
    """The scenario folder's files those imports name (looked up each time)."""
    found: list[Path] = []
    for base, name in names:
        parts = name.split(".")
        for n in range(1, len(parts) + 1):
            stem = base.joinpath(*parts[:n])
            for candidate in (stem.with_name(stem.name + ".py"), stem / "__init__.py"):
                if candidate.is_file():
                    found.append(candidate)
    return found


_PART_WORDS = {"scenario": "scenario file", "params": "params", "settings": "run settings",
               "attribution": "attribution", "runtime": "runtime", "host": "host",
               "gpu": "GPU"}


def why_changed(old: RunKey | None, new: RunKey) -> str | None:
    """None when the keys match; else why, in words ("pins changed since it ran (a==1 ->
    a==2)")."""
    if old is None:
        return BEFORE_KEYS
    parts: list[str] = []
    details: list[str] = []
    if old.image != new.image:
        if old.image.ref != new.image.ref:
            parts.append("image")
            details.append(f"{old.image.ref} -> {new.image.ref}")
        if old.image.pip != new.image.pip:
            parts.append("pins")
            details.append(f"{' '.join(old.image.pip) or 'none'} -> "
                           f"{' '.join(new.image.pip) or 'none'}")
        if old.image.python != new.image.python:
            parts.append("python")
            details.append(f"{old.image.python} -> {new.image.python}")
        if old.image.as_of != new.image.as_of:
            parts.append("as_of day")
            details.append(f"{old.image.as_of} -> {new.image.as_of}")
    for name, words in _PART_WORDS.items():
        a, b = getattr(old, name), getattr(new, name)
        if a == b:
            continue
        parts.append(words)
        if isinstance(a, dict) and isinstance(b, dict):
            details.extend(f"{k} {_show(a.get(k))} -> {_show(b.get(k))}"
                           for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k))
        elif name != "scenario":
            details.append(f"{_show(a)} -> {_show(b)}")
    if not parts:
        return None
    return f"{', '.join(parts)} changed since it ran" + (
        f" ({'; '.join(details)})" if details else "")


def _show(value: object) -> str:
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or "none"
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else str(value)
