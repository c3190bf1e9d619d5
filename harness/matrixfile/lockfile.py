"""Lock files as images: a requirements file of exact pins (with `--hash`), a
`pylock.toml` (PEP 751) or a `uv.lock`, read into one local image's `pip:` pins and the
hashes its venv install checks. The format is told by the file's name, else its text.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import EnvironmentUnavailable, InputError

# A project name as PEP 508 writes it (the matrix's `pip:` pins read it too).
NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
REQUIREMENTS, PYLOCK, UV_LOCK = "requirements", "pylock.toml", "uv.lock"
# The digests pip's and uv's --require-hashes check.
HASH_ALGORITHMS = ("sha256", "sha384", "sha512")
_PIN = re.compile(rf"^(?P<name>{NAME})\s*(?:\[[^\]]*\])?\s*(?P<op>===|==)\s*"
                  r"(?P<version>[^\s;,*]+)\s*(?:;\s*(?P<marker>.+?))?\s*$")
_HASH = re.compile(r"(?:^|\s)--hash(?:=|\s+)(?P<value>\S+)")
_HEX = re.compile(r"^[0-9a-fA-F]+$")
RELOCK = ("re-lock with hashes and exact pins: `uv pip compile --generate-hashes "
          "requirements.in`, `pip-compile --generate-hashes`, `uv lock` or `uv export "
          "--format pylock.toml`")


class LockError(InputError):
    """A lock file harness cannot take as an image (exit 2), with where and the fix."""

    def __init__(self, file: Path, problem: str, fix: str = ""):
        self.file, self.problem, self.fix = file, problem, fix
        super().__init__(f"{file}: {problem}" + (f"\n  fix: {fix}" if fix else ""))


def line_of(file: Path, name: str) -> int | None:
    """The line of lock `file` where package `name` is pinned; None if not found."""
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for number, line in enumerate(lines, 1):
        found = _NAMED.match(line) or _REQUIRED.match(line)
        if found is not None and normal(found["name"]) == normal(name):
            return number
    return None


# A package's line in a lock: `name = "pkg"` opening its TOML table, or a requirement.
_NAMED = re.compile(r'^\s*name\s*=\s*"(?P<name>[^"]+)"')
_REQUIRED = re.compile(rf"^\s*(?P<name>{NAME})\s*(?:\[|===|==|;|\\|$)")


def normal(name: str) -> str:
    """A project name compared as PEP 503 says: `PyYAML`, `pyyaml` -> `pyyaml`."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Pin:
    """One locked package: exact version, environment marker and hashes (`sha256:HEX`)."""

    name: str
    version: str
    marker: str | None = None
    hashes: tuple[str, ...] = ()

    @property
    def requirement(self) -> str:
        """The pip requirement: `attrs==25.1.0`, `colorama==0.4.6; sys_platform == 'win32'`."""
        return f"{self.name}=={self.version}" + (f"; {self.marker}" if self.marker else "")


@dataclass(frozen=True)
class Lock:
    file: Path
    kind: str                       # REQUIREMENTS, PYLOCK or UV_LOCK
    pins: tuple[Pin, ...]

    @property
    def hashed(self) -> bool:
        return any(p.hashes for p in self.pins)


def read(path: Path) -> Lock:
    """The lock at `path`, its pins in the file's order.

    Raises:
        LockError: unreadable, no known format, or a bad pin, hash or duplicate.
        EnvironmentUnavailable: a TOML lock on Python 3.10 without `tomli`.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise LockError(path, "lock file not found",
                        "give the path of a requirements.txt, pylock.toml or uv.lock "
                        "(in a matrix, relative to the matrix file's directory)") from exc
    except IsADirectoryError as exc:
        inside = [n for n in ("uv.lock", "pylock.toml", "requirements.txt")
                  if (path / n).is_file()]
        raise LockError(path, "is a directory, not a lock file",
                        f"name the file: {path / inside[0]}" if inside
                        else "name a requirements.txt, pylock.toml or uv.lock") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise LockError(path, f"cannot read the lock file: {exc}") from exc
    kind, doc = _kind(path, text)
    if kind == PYLOCK:
        pins = list(_pylock(path, doc))
    elif kind == UV_LOCK:
        pins = list(_uv_lock(path, doc))
    else:
        pins = list(_requirements(path, text))
    return Lock(path, kind, _checked(path, kind, pins))


def _kind(path: Path, text: str) -> tuple[str, dict[str, Any]]:
    """The file's format and, for a TOML one, its document."""
    name = path.name
    named = (UV_LOCK if name == UV_LOCK else PYLOCK
             if re.fullmatch(r"pylock(\.[^.]+)?\.toml", name) else None)
    if named is None and name.endswith((".txt", ".in")):
        return REQUIREMENTS, {}
    try:
        doc = _toml().loads(text)
    except ValueError as exc:      # tomllib.TOMLDecodeError is a ValueError
        if named is None:
            return REQUIREMENTS, {}
        again = "uv lock" if named == UV_LOCK else "uv export --format pylock.toml"
        raise LockError(path, f"not valid TOML: {exc}", f"regenerate it ({again})") from exc
    if "lock-version" in doc or isinstance(doc.get("packages"), list):
        return PYLOCK, doc
    if isinstance(doc.get("package"), list):
        return UV_LOCK, doc
    if named is not None or doc:
        raise LockError(path, "a TOML file that is neither a pylock.toml (no "
                        "`lock-version`, no [[packages]]) nor a uv.lock (no [[package]])",
                        "name a requirements.txt, pylock.toml or uv.lock")
    return REQUIREMENTS, {}    # comments only: a requirements file without pins


def _toml() -> Any:
    """tomllib (Python 3.11+), else tomli where installed.

    Raises:
        EnvironmentUnavailable: neither.
    """
    for module in ("tomllib", "tomli"):
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError:
            continue
    raise EnvironmentUnavailable("reading a TOML lock (pylock.toml, uv.lock) needs Python "
                                 "3.11 or the tomli package\n  fix: pip install tomli, or "
                                 "export the lock as a requirements file")


def _requirements(path: Path, text: str) -> Iterator[Pin]:
    """Each `name==version [; marker] [--hash=ALGO:HEX ...]` line; anything else is
    refused."""
    for number, line in _logical_lines(text):
        where = f"line {number}"
        hashes = tuple(m["value"] for m in _HASH.finditer(line))
        rest = _HASH.sub(" ", line).strip()
        if not rest:
            if hashes:
                raise LockError(path, f"{where}: --hash with no requirement before it",
                                "put each --hash on its package's line (or after a `\\`)")
            continue
        if rest.startswith("-"):
            option = rest.split()[0].split("=", 1)[0]
            raise LockError(path, f"{where}: option {option} is not read from a lock "
                            "(harness takes its pins and --hash values only)",
                            "remove the line; an index goes in pip's or uv's own settings "
                            "(PIP_INDEX_URL, UV_INDEX_URL), and a local project or "
                            "another file is not a pin")
        m = _PIN.match(rest)
        if m is None:
            name = re.match(NAME, rest)
            said = name.group(0) if name else rest.split()[0]
            raise LockError(path, f"{where}: {said}: no exact version ({rest!r})",
                            f"pin it, e.g. {said}==1.2.3: {RELOCK}")
        yield Pin(m["name"], m["version"], m["marker"], hashes)


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, line) with comments dropped and `\\` continuations joined."""
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = re.sub(r"(^|\s)#.*$", "", raw)
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending.append(line.rstrip()[:-1])
            continue
        pending.append(line)
        yield start, " ".join(pending).strip()
        pending = []
    if pending:
        yield start, " ".join(pending).strip()


def _pylock(path: Path, doc: Mapping[str, Any]) -> Iterator[Pin]:
    """PEP 751 `[[packages]]`, with their files' hashes; the editable project is skipped."""
    packages = doc.get("packages", [])
    if not isinstance(packages, list):
        raise LockError(path, "`packages` is not an array of tables ([[packages]])")
    for i, entry in enumerate(packages):
        name = _name(path, entry, f"packages[{i}]")
        if isinstance(entry.get("directory"), dict) and entry["directory"].get("editable"):
            continue
        for source in ("vcs", "archive", "directory"):
            if source in entry:
                raise LockError(path, f"package {name}: from a {source}, not a package "
                                "index; harness pins index packages only",
                                f"lock {name} from the index, or install it in the "
                                "scenario's own setup")
        files = [*(entry.get("wheels") or [])]
        if isinstance(entry.get("sdist"), dict):
            files.append(entry["sdist"])
        hashes: list[str] = []
        for f in files:
            table = f.get("hashes") if isinstance(f, dict) else None
            if not isinstance(table, dict):
                raise LockError(path, f"package {name}: a file without a `hashes` table",
                                "PEP 751 gives each wheel and sdist `hashes = {sha256 = "
                                "\"...\"}`: " + RELOCK)
            hashes.extend(f"{algo}:{value}" for algo, value in table.items()
                          if algo in HASH_ALGORITHMS)
        marker = entry.get("marker")
        yield Pin(name, _version(path, entry, name), marker if isinstance(marker, str)
                  else None, _unique(hashes))


def _uv_lock(path: Path, doc: Mapping[str, Any]) -> Iterator[Pin]:
    """uv's `[[package]]` entries with hashes; the project's own packages are skipped.
    uv locks for every platform, so a package gets its incoming edges' markers (or'ed)
    and a forked one its `resolution-markers`."""
    packages = doc["package"]
    edges: dict[str, list[tuple[str | None, str | None]]] = {}   # name: (version, marker)
    for entry in packages:
        if not isinstance(entry, dict):
            continue
        groups = [entry.get("dependencies") or []]
        for key in ("optional-dependencies", "dev-dependencies"):
            table = entry.get(key)
            if isinstance(table, dict):
                groups.extend(table.values())
        for group in groups:
            for dep in group if isinstance(group, list) else ():
                if isinstance(dep, dict) and isinstance(dep.get("name"), str):
                    marker, version = dep.get("marker"), dep.get("version")
                    edges.setdefault(normal(dep["name"]), []).append((
                        version if isinstance(version, str) else None,
                        marker if isinstance(marker, str) and marker else None))
    for i, entry in enumerate(packages):
        name = _name(path, entry, f"package[{i}]")
        source = entry.get("source")
        kinds = set(source) if isinstance(source, dict) else set()
        if kinds & {"editable", "virtual"}:
            continue
        if kinds - {"registry"}:
            what = "/".join(sorted(kinds - {"registry"}))
            raise LockError(path, f"package {name}: source is {what}, not a package index; "
                            "harness pins index packages only",
                            f"lock {name} from the index, or install it in the scenario's "
                            "own setup")
        hashes: list[str] = []
        files = [*(entry.get("wheels") or [])]
        if isinstance(entry.get("sdist"), dict):
            files.append(entry["sdist"])
        for f in files:
            value = f.get("hash") if isinstance(f, dict) else None
            if isinstance(value, str):
                hashes.append(value)
        version = _version(path, entry, name)
        # the edges to this version (a forked package's edges name theirs)
        markers = [m for v, m in edges.get(normal(name), [(None, None)])
                   if v in (None, version)] or [None]
        edge = None if None in markers else _any(list(dict.fromkeys(
            m for m in markers if m)))
        forks = entry.get("resolution-markers")
        fork = _any([m for m in forks if isinstance(m, str)]) if isinstance(
            forks, list) and forks else None
        marker = (f"({fork}) and ({edge})" if fork and edge and fork != edge
                  else fork or edge)
        yield Pin(name, version, marker, _unique(hashes))


def _any(markers: list[str]) -> str:
    """Markers or'ed: `a`, or `(a) or (b)`."""
    return markers[0] if len(markers) == 1 else " or ".join(f"({m})" for m in markers)


def _name(path: Path, entry: Any, where: str) -> str:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) \
            or not re.fullmatch(NAME, entry["name"]):
        raise LockError(path, f"{where}: a package without a valid `name`",
                        f"regenerate the lock: {RELOCK}")
    return str(entry["name"])


def _version(path: Path, entry: Mapping[str, Any], name: str) -> str:
    version = entry.get("version")
    if not isinstance(version, str) or not re.fullmatch(r"[^\s;,*]+", version):
        raise LockError(path, f"package {name}: no exact version"
                        + (f" ({version!r})" if version is not None else ""),
                        f"lock {name} at one version: {RELOCK}")
    return version


def _unique(hashes: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(hashes))


def _checked(path: Path, kind: str, pins: list[Pin]) -> tuple[Pin, ...]:
    """The pins, checked: hashes are `ALGO:HEX`, all hashed or none (--require-hashes),
    no package twice for one environment.

    Raises:
        LockError: the first that is not so.
    """
    if not pins:
        raise LockError(path, f"no packages in this {kind}",
                        "give a lock with at least one pinned package (`pkg==1.2.3`)")
    seen: dict[str, Pin] = {}
    for p in pins:
        for h in p.hashes:
            algo, _, value = h.partition(":")
            if algo not in HASH_ALGORITHMS or not _HEX.match(value):
                raise LockError(path, f"package {p.name}: bad hash {h!r}",
                                f"write --hash=sha256:HEX (one of {', '.join(HASH_ALGORITHMS)})")
        before = seen.get(normal(p.name))
        if before is not None and (before.marker is None or p.marker is None):
            raise LockError(path, f"package {p.name}: listed twice ({before.version} and "
                            f"{p.version}) with no environment marker to tell them apart",
                            f"keep one pin of {p.name}")
        seen[normal(p.name)] = p
    if any(p.hashes for p in pins):
        bare = next((p for p in pins if not p.hashes), None)
        if bare is not None:
            raise LockError(path, f"package {bare.name}: no hash, where other packages have "
                            "them (pip's --require-hashes checks every package or none)",
                            f"add its hashes: {RELOCK}")
    return tuple(pins)


def image_fields(lock: Lock) -> tuple[tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...]]:
    """An image's `pip` and `hashes` ((requirement, hashes); () if unhashed)."""
    pip = tuple(p.requirement for p in lock.pins)
    hashes = tuple((p.requirement, p.hashes) for p in lock.pins) if lock.hashed else ()
    return pip, hashes


def requirement_lines(hashes: tuple[tuple[str, tuple[str, ...]], ...]) -> list[str]:
    """The lines of a requirements file for `pip install --require-hashes -r FILE`."""
    return [" ".join([req.replace(";", " ;", 1), *(f"--hash={h}" for h in hs)])
            for req, hs in hashes]


def carried(pins: tuple[str, ...], *sources: tuple[tuple[str, tuple[str, ...]], ...]
            ) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The hashes of a hybrid's `pins` taken from `sources`; () if any pin is in none,
    since --require-hashes checks every package or none."""
    known: dict[tuple[str, str], tuple[str, ...]] = {}
    for source in sources:
        for requirement, hashes in source:
            m = _PIN.match(requirement)
            if m is not None:
                known.setdefault((normal(m["name"]), m["version"]), hashes)
    out = []
    for pin in pins:
        m = _PIN.match(pin)
        found = known.get((normal(m["name"]), m["version"])) if m is not None else None
        if not found:
            return ()
        out.append((pin, found))
    return tuple(out)
