"""YAML text -> plain data plus the line of every key path (safe loader only), and plain
data -> YAML text (`dump_text`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.errors import SpecError

PathKey = tuple[str | int, ...]

# An alias bomb expands to billions of nodes when walked; real matrices have hundreds.
MAX_NODES = 100_000
MAX_DEPTH = 64
MAX_BYTES = 256 * 1024   # parsing is slow; real matrices are a few KiB


@dataclass(frozen=True)
class Located:
    """Parsed YAML and the 1-based line of each key path, e.g. ("matrix", "image", 1)."""

    file: str
    data: Any
    lines: dict[PathKey, int]

    def line(self, path: PathKey) -> int | None:
        # Fall back to the nearest enclosing key that has a line.
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), None)


def format_path(path: PathKey) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class _Loader(yaml.SafeLoader):
    """SafeLoader whose impossible dates (`2025-02-30`) are YAML errors with a line."""


def _timestamp(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    try:
        return yaml.SafeLoader.construct_yaml_timestamp(loader, node)
    except ValueError as exc:
        raise yaml.constructor.ConstructorError(
            None, None, f"{node.value!r} is not a date ({exc})", node.start_mark) from exc


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp)


def load_text(text: str, file: str) -> Located:
    """Parse YAML with `yaml.SafeLoader`, recording lines.

    Raises:
        SpecError: invalid YAML, too big or deep, or a duplicate key.
    """
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise SpecError(file, "", None, f"file is larger than {MAX_BYTES // 1024} KiB",
                        "a matrix is a short YAML file; split it")
    loader = None
    try:
        # The constructor already rejects control characters (ReaderError).
        loader = _Loader(text)
        node = loader.get_single_node()
        lines: dict[PathKey, int] = {}
        if node is not None:
            _walk(node, (), lines, [0], file)
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = exc.problem or str(exc)
        fix = ("write a day that exists, YYYY-MM-DD" if "is not a date" in problem
               else "check indentation and quoting near that line")
        raise SpecError(file, "", line, f"not valid YAML: {problem}", fix) from exc
    except yaml.YAMLError as exc:
        raise SpecError(file, "", None, f"not valid YAML: {exc}") from exc
    except RecursionError as exc:
        raise SpecError(file, "", None, "YAML nesting is too deep") from exc
    finally:
        if loader is not None:
            loader.dispose()
    return Located(file, data, lines)


def dump_text(data: Any) -> str:
    """Plain data (as `load_text` returns it) as YAML text, keys in their given order."""
    return yaml.safe_dump(data, sort_keys=False)


def _walk(node: yaml.Node, path: PathKey, lines: dict[PathKey, int], count: list[int],
          file: str) -> None:
    count[0] += 1
    if count[0] > MAX_NODES:
        raise SpecError(file, format_path(path), node.start_mark.line + 1,
                        f"more than {MAX_NODES} YAML nodes (an alias/anchor bomb?)",
                        "write the matrix out plainly")
    if len(path) > MAX_DEPTH:
        raise SpecError(file, format_path(path), node.start_mark.line + 1,
                        f"nested deeper than {MAX_DEPTH} levels")
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.tag)
            child = (*path, str(key))
            line = key_node.start_mark.line + 1
            if str(key) in seen and key != "<<":
                # YAML keeps the last silently; a matrix never means both.
                raise SpecError(file, format_path(child), line,
                                f"duplicate key {key!r} (first on line {seen[str(key)]}); "
                                "YAML would keep only this one",
                                f"merge the two into one {key!r} entry, or delete one")
            seen[str(key)] = line
            lines.setdefault(child, key_node.start_mark.line + 1)
            _walk(value_node, child, lines, count, file)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*path, index), lines, count, file)


def read_text(file: Path, fix: str) -> str:
    """A matrix-like file's text; `fix` says how to name the right file.

    Raises:
        SpecError: the file is missing, unreadable or not UTF-8.
    """
    try:
        return file.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise SpecError(str(file), "", None, "file not found", fix) from exc
    except IsADirectoryError as exc:
        inside = sorted(p.name for p in file.glob("*.y*ml") if p.is_file())[:3]
        raise SpecError(str(file), "", None, "is a directory, not a matrix file",
                        f"{fix}: one of {', '.join(str(file / n) for n in inside)}" if inside
                        else fix) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(str(file), "", None, f"cannot read: {exc}") from exc
