"""What changed in a package's code between two releases: the files of each (a module's
path within the distribution -> its text, an extension's binary -> its digest, as
`runtimes.sources` reads them) diffed file by file, and a Python module's functions
diffed at the syntax tree: a function or method (by its qualified name, as Python names
it: `Class.method`, `outer.<locals>.inner`) changed where its code did, docstrings and
comments left out, with the lines its source text changed by; added and removed ones,
and one that moved to another module (matched by its qualified name, else by its code)
with whether its code changed there. Native code (C, C++, Cython, Rust sources; .so and
.pyd binaries) is diffed by file, and named by the extension module it builds. Pure: no I/O.
"""

from __future__ import annotations

import ast
import copy
import difflib
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

NATIVE_SOURCES = (".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".pyx", ".pxd", ".pxi",
                  ".rs")
BINARIES = (".so", ".pyd", ".dylib")
CHANGED, ADDED, REMOVED, MOVED = "changed", "added", "removed", "moved"
# Paths no import reaches: an sdist's tests, docs and build files.
NOT_IMPORTED = re.compile(r"(^|/)(tests?|testing|docs?|examples?|benchmarks?|bench|scripts|"
                          r"tools|ci)/|(^|/)(setup|conftest|noxfile|tasks)\.py$")


def is_native(path: str) -> bool:
    """A native source or binary (`_impl.cpython-311-x86_64-linux-gnu.so`, `lib.so.6`)."""
    low = path.lower()
    return low.endswith(NATIVE_SOURCES + BINARIES) or ".so." in low


def extension_of(path: str) -> str:
    """The extension module a native file builds or is, as Python imports it:
    `multidict/_multidict.c` and `multidict/_multidict.cpython-311-x86_64-linux-gnu.so`
    are `multidict._multidict`; an sdist's `src/` is cut."""
    parts = re.sub(r"^(src|lib|python)/", "", path).split("/")
    return ".".join([*parts[:-1], parts[-1].split(".", 1)[0]])


@dataclass(frozen=True)
class FunctionChange:
    """A function or method of one module: changed (its code), added or removed."""

    path: str            # the module's path within the distribution
    function: str        # qualified name
    status: str          # changed, added, removed, moved
    lines: int           # lines of its source text changed (its length, added/removed;
    #                      moved: changed there, 0 where its code is the same)
    moved_from: str | None = None       # moved: the module it was in
    was: str | None = None              # moved: its qualified name there


@dataclass(frozen=True)
class FileChange:
    """One file of the distribution changed, added or removed; `lines` for text."""

    path: str
    status: str
    lines: int | None = None      # None: a binary, or a module that did not parse


@dataclass(frozen=True)
class CodeDiff:
    """Two releases' files diffed: every file that differs; a module's functions on
    request (`functions_of`), kept here for the modules asked."""

    files: tuple[FileChange, ...]
    functions: tuple[FunctionChange, ...] = ()
    unparsed: tuple[str, ...] = ()          # modules that did not parse on one side

    def native(self) -> tuple[FileChange, ...]:
        return tuple(f for f in self.files if is_native(f.path))

    def changed(self, path: str) -> bool:
        return any(f.path == path for f in self.files)


def _lines_changed(old: str, new: str) -> int:
    a, b = old.splitlines(), new.splitlines()
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    return sum(max(i2 - i1, j2 - j1) for op, i1, i2, j1, j2 in ops if op != "equal")


def _without_docstrings(node: ast.AST) -> ast.AST:
    """A copy of `node` whose functions and classes carry no docstring."""
    node = copy.deepcopy(node)
    for sub in ast.walk(node):
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = sub.body
            if body and isinstance(body[0], ast.Expr) and isinstance(
                    body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                sub.body = body[1:] or [ast.Pass()]
    return node


def functions(source: str) -> dict[str, tuple[str, str]]:
    """Qualified name -> (its code as a syntax tree dump, its source text), for every
    function and method of a module (a name defined twice: both, one after the other).

    Raises:
        SyntaxError: the module does not parse (Python 2, a template).
    """
    tree = ast.parse(source)
    lines = source.splitlines()
    out: dict[str, tuple[str, str]] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                start = min([d.lineno for d in child.decorator_list] + [child.lineno])
                text = "\n".join(lines[start - 1:child.end_lineno or child.lineno])
                code = ast.dump(_without_docstrings(child))
                was = out.get(name)
                out[name] = (was[0] + code, was[1] + "\n" + text) if was else (code, text)
                walk(child, name + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")
            elif not isinstance(child, ast.expr):   # if, try, with, match: their bodies
                walk(child, prefix)

    walk(tree, "")
    return out


def module_diff(path: str, old: str, new: str) -> list[FunctionChange]:
    """The functions of one module that changed, came or went, largest change first.

    Raises:
        SyntaxError: one side does not parse.
    """
    return _changes(path, functions(old), functions(new))


Code = dict[str, tuple[str, str]]     # `functions`' answer


def _changes(path: str, a: Code, b: Code) -> list[FunctionChange]:
    out = [FunctionChange(path, name, CHANGED, _lines_changed(a[name][1], b[name][1]))
           for name in a.keys() & b.keys() if a[name][0] != b[name][0]]
    out += [FunctionChange(path, name, ADDED, len(b[name][1].splitlines()))
            for name in b.keys() - a.keys()]
    out += [FunctionChange(path, name, REMOVED, len(a[name][1].splitlines()))
            for name in a.keys() - b.keys()]
    return sorted(out, key=lambda c: (-c.lines, c.function))


# A function matched by its code alone has at least this many lines: one-line bodies
# (`return self._x`) are alike in many places.
MATCH_LINES = 3
_NAMED = re.compile(r"^(Async)?FunctionDef\(name='[^']*', ")


def _unique(keys: list[tuple[str, tuple[str, str]]]) -> dict[str, tuple[str, str]]:
    seen: dict[str, list[tuple[str, str]]] = {}
    for k, at in keys:
        seen.setdefault(k, []).append(at)
    return {k: ats[0] for k, ats in seen.items() if len(ats) == 1}


def moves(funcs: list[FunctionChange], code: Mapping[tuple[str, str], tuple[str, str]]
          ) -> list[FunctionChange]:
    """`funcs` with each function removed from one module and added to another matched
    as one that moved: by its qualified name (the only one of that name to go and to
    come), else by its code (the only one of that code, its name aside). `code`: (path,
    name) -> `functions`' (code, text) of each added and removed one."""
    gone = [c for c in funcs if c.status == REMOVED]
    came = [c for c in funcs if c.status == ADDED]
    pairs: dict[tuple[str, str], tuple[str, str]] = {}   # came -> gone
    for key in (lambda c: c.function,
                lambda c: _NAMED.sub("", code[(c.path, c.function)][0])
                if len(code[(c.path, c.function)][1].splitlines()) >= MATCH_LINES else ""):
        taken = set(pairs.values())
        old = _unique([(key(c), (c.path, c.function)) for c in gone
                       if (c.path, c.function) not in taken])
        new = _unique([(key(c), (c.path, c.function)) for c in came
                       if (c.path, c.function) not in pairs])
        pairs.update((at, old[k]) for k, at in new.items()
                     if k and k in old and old[k][0] != at[0])
    if not pairs:
        return funcs
    out = [c for c in funcs if (c.path, c.function) not in pairs
           and (c.path, c.function) not in set(pairs.values())]
    for (path, name), (was_path, was) in pairs.items():
        (a, ta), (b, tb) = code[(was_path, was)], code[(path, name)]
        same = _NAMED.sub("", a) == _NAMED.sub("", b)
        out.append(FunctionChange(path, name, MOVED, 0 if same else _lines_changed(ta, tb),
                                  was_path, was))
    return sorted(out, key=lambda c: (-c.lines, c.path, c.function))


def _text(data: str | bytes) -> str | None:
    return data if isinstance(data, str) else None


def file_diff(old: Mapping[str, str | bytes], new: Mapping[str, str | bytes]
              ) -> tuple[FileChange, ...]:
    """Every file that differs between two releases (a text: str; a binary: its digest,
    bytes), by its path within the distribution."""
    out: list[FileChange] = []
    for path in sorted(old.keys() | new.keys()):
        a, b = old.get(path), new.get(path)
        if a == b:
            continue
        if a is None or b is None:
            text = _text(b if b is not None else a or b"")
            out.append(FileChange(path, ADDED if a is None else REMOVED,
                                  len(text.splitlines()) if text is not None else None))
            continue
        ta, tb = _text(a), _text(b)
        out.append(FileChange(path, CHANGED, _lines_changed(ta, tb)
                              if ta is not None and tb is not None else None))
    return tuple(out)


def diff(old: Mapping[str, str | bytes], new: Mapping[str, str | bytes],
         modules: set[str] | None = None, most: int = 300,
         also: Collection[str] = ()) -> CodeDiff:
    """The files that differ, and the functions of the changed Python modules among
    `modules` (None: every importable one, up to `most` modules, those in `also` first
    and whatever their path)."""
    files = file_diff(old, new)
    funcs: list[FunctionChange] = []
    unparsed: list[str] = []
    code: dict[tuple[str, str], tuple[str, str]] = {}   # added and removed ones
    wanted = sorted((f for f in files if f.status == CHANGED and f.path.endswith(".py") and (
        f.path in modules if modules is not None
        else f.path in also or not NOT_IMPORTED.search(f.path))),
        key=lambda f: f.path not in also)
    for f in wanted[:most]:
        try:
            a, b = functions(_text(old[f.path]) or ""), functions(_text(new[f.path]) or "")
        except (SyntaxError, ValueError, RecursionError):
            unparsed.append(f.path)
            continue
        found = _changes(f.path, a, b)
        code.update(((f.path, c.function), (a if c.status == REMOVED else b)[c.function])
                    for c in found if c.status != CHANGED)
        funcs += found
    for f in files:   # a module added or removed: each of its functions too
        text = _text((new if f.status == ADDED else old).get(f.path) or b"")
        if f.status == CHANGED or not f.path.endswith(".py") or text is None or (
                modules is not None and f.path not in modules):
            continue
        try:
            names = functions(text)
        except (SyntaxError, ValueError, RecursionError):
            continue
        funcs += [FunctionChange(f.path, n, f.status, len(t.splitlines()))
                  for n, (_, t) in names.items()]
        code.update(((f.path, n), c) for n, c in names.items())
    return CodeDiff(files, tuple(moves(funcs, code)), tuple(unparsed))
