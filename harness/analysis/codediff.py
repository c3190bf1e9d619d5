"""What changed in a package's code between two releases, and which changed function holds
the row's attributed samples. Files are diffed one by one; a module's functions at the
syntax tree by qualified name (docstrings and comments left out), with added, removed
and moved ones; native code by file, named by its extension module. A site's weight
goes to its innermost changed function, not to a caller on every stack. Pure: no I/O.
"""

from __future__ import annotations

import ast
import copy
import difflib
import os
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeAlias

from harness.analysis.where import Frame, Where, function

if TYPE_CHECKING:   # result.codec's JSON, spelled here: analysis stands below result
    JSON: TypeAlias = str | int | float | bool | list["JSON"] | dict[str, "JSON"] | None


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
    """The extension module a native file builds or is, as Python imports it
    (`multidict/_multidict.c` is `multidict._multidict`; an sdist's `src/` is cut)."""
    parts = re.sub(r"^(src|lib|python)/", "", path).split("/")
    return ".".join([*parts[:-1], parts[-1].split(".", 1)[0]])


@dataclass(frozen=True)
class FunctionChange:
    """A function or method of one module: changed (its code), added or removed."""

    path: str            # the module's path within the distribution
    function: str        # qualified name
    status: str          # changed, added, removed, moved
    lines: int           # lines of its source text changed (moved: changed there)
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
    """Two releases' files diffed; a module's functions on request (`functions_of`)."""

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
    """Qualified name -> (code as a syntax tree dump, source text), for every function and
    method of a module (a name defined twice: both).

    Raises:
        SyntaxError: The module does not parse (Python 2, a template).
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
        SyntaxError: One side does not parse.
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


# A function matched by code alone has this many lines at least: one-liners are common.
MATCH_LINES = 3
_NAMED = re.compile(r"^(Async)?FunctionDef\(name='[^']*', ")


def _unique(keys: list[tuple[str, tuple[str, str]]]) -> dict[str, tuple[str, str]]:
    seen: dict[str, list[tuple[str, str]]] = {}
    for k, at in keys:
        seen.setdefault(k, []).append(at)
    return {k: ats[0] for k, ats in seen.items() if len(ats) == 1}


def moves(funcs: list[FunctionChange], code: Mapping[tuple[str, str], tuple[str, str]]
          ) -> list[FunctionChange]:
    """`funcs` with a function removed from one module and added to another matched as
    moved: by qualified name where unique, else by unique code. `code`: (path, name) ->
    (code, text) of each added and removed one."""
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
    """Every file that differs between two releases by path (text; a binary's digest)."""
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
    `modules` (None: every importable one, up to `most`, those in `also` first)."""
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


PARTS = {"time": "of the late samples", "stack": "of the sampled stacks",
         "heap": "of the heap growth",
         "device": "of the device memory growth", "native": "of the native memory growth"}
FOUND, NATIVE, ELSEWHERE, UNCHANGED, OUTSIDE, NONE, NOT_FETCHED = (
    "found", "native", "elsewhere", "unchanged", "outside", "unattributed", "not fetched")
SHOWN = 3
HEADERS = (".h", ".hh", ".hpp", ".pxd", ".pxi")


@dataclass(frozen=True)
class Hit:
    """A changed function, with its share of the attributed part (None: not attributed)."""

    path: str
    function: str
    lines: int
    status: str
    share: float | None = None
    moved_from: str | None = None   # moved: the module and function it was, `a.py: f`

    def to_json(self) -> dict[str, JSON]:
        return {"module": self.path, "function": self.function, "lines": self.lines,
                "status": self.status,
                "share": None if self.share is None else round(self.share, 4),
                "moved_from": self.moved_from}

    def change(self) -> str:
        """"changed (8 lines)", "moved from `pyparsing.py` and changed (8 lines)"."""
        if self.status != MOVED:
            return f"{self.status} ({lines(self.lines)})"
        return f"moved from `{self.moved_from}`" + (
            f" and changed ({lines(self.lines)})" if self.lines else ", its code unchanged")


def hit(c: FunctionChange, share: float | None = None) -> Hit:
    """A changed function as the answer names it."""
    was = None
    if c.moved_from is not None:
        was = shown(c.moved_from) + ("" if c.was in (None, c.function) else f": {c.was}")
    return Hit(c.path, c.function, c.lines, c.status, share, was)


@dataclass(frozen=True)
class CodeAnswer:
    """One proved change's code read against the row's attributed sites."""

    package: str
    good: str
    bad: str
    status: str             # found, native, elsewhere, unchanged, outside, unattributed,
    words: str              # not fetched; the answer in one line
    part: str | None = None
    hits: tuple[Hit, ...] = ()
    native: tuple[str, ...] = ()          # extension modules whose code changed
    native_frame: str | None = None
    sites: tuple[Hit, ...] = ()           # the attributed functions in the package
    files: tuple[str, ...] = ()           # the distribution files read

    def to_json(self) -> dict[str, JSON]:
        return {"package": self.package, "good": self.good, "bad": self.bad,
                "status": self.status, "words": self.words, "part": self.part,
                "functions": [h.to_json() for h in self.hits],
                "native": list(self.native), "native_frame": self.native_frame,
                "attributed": [h.to_json() for h in self.sites], "files": list(self.files)}


def not_fetched(package: str, good: str, bad: str, why: str) -> CodeAnswer:
    return CodeAnswer(package, good, bad, NOT_FETCHED,
                      f"{package} {good} -> {bad}: code not read: {why}")


# ---------------------------------------------------------------- the attributed part
def weighted(w: Where, part: str) -> list[tuple[tuple[Frame, ...], float]]:
    """Each site of `part` with its share of the part (late samples; bytes grown)."""
    if part == "time":
        total = w.stack_samples[1] or sum(s.late for s in w.stack)
        return [(s.frames, s.late / total) for s in w.stack if s.late > 0 and total > 0]
    if part == "stack":   # a run stopped before its late window: the samples it has
        total = sum(s.early + s.late for s in w.stack)
        return [(s.frames, (s.early + s.late) / total) for s in w.stack
                if s.early + s.late > 0]
    sites = [s for s in w.sites.get(part, ()) if s.size > 0]
    total = sum(s.size for s in sites)
    return [(s.frames, s.size / total) for s in sites]


def part_of(w: Where, first: str | None = None, kinds: Sequence[str] = ()) -> str | None:
    """The part that answers the verdict: the first attribution kind (`kinds`, in the
    verdict's order) with something attributed, else explain's first change's, else any."""
    order = [p for k in kinds for p in (("time", "stack") if k == "stack" else (k,))]
    order += ([first] if first is not None else []) + (
        ["stack"] if first == "time" else []) + list(PARTS)
    return next((p for p in order if p in PARTS and weighted(w, p)), None)


def in_package(path: str, files: Sequence[str]) -> str | None:
    """The distribution's path for a frame's file (`werkzeug/http.py`), else None."""
    parts = path.replace("\\", "/").split("/")
    at = max((i for i, p in enumerate(parts) if p in ("site-packages", "dist-packages")),
             default=None)
    if at is None:
        return None
    rel = "/".join(parts[at + 1:])
    found = [f for f in files if f == rel or f.endswith("/" + rel)]
    return min(found, key=len) if found else None


def _same(frame_fn: str, changed: str) -> bool:
    """A frame's function is the changed one: the same qualified name, or the same last
    part for a bare name (Python before 3.11)."""
    return frame_fn == changed or ("." not in frame_fn and changed.rsplit(".", 1)[-1]
                                   == frame_fn)


def shown(path: str) -> str:
    """A module as the answer names it: its path below the package's top folder."""
    path = re.sub(r"^(src|lib|python)/", "", path)
    return path.split("/", 1)[1] if "/" in path else path


def _where(frames: Sequence[Frame]) -> str:
    """The innermost frame as explain names it: `x.py:38 step`."""
    return f"{os.path.basename(frames[0][0])}:{frames[0][1]} {function(frames, 0)}"


def _share(h: Hit, part: str) -> str:
    return f"{(h.share or 0) * 100:.0f} % {PARTS[part]}"


def lines(n: int) -> str:
    return f"{n} line{'' if n == 1 else 's'}"


def _fn(h: Hit) -> str:
    return f"`{shown(h.path)}: {h.function}`"


# ---------------------------------------------------------------- the answer
def attributed_modules(w: Where, part: str, files: Sequence[str]) -> set[str]:
    """The package's modules (distribution paths) any site of `part` runs through."""
    return {p for frames, _ in weighted(w, part) for f in frames
            if (p := in_package(f[0], files)) is not None}


# Fewer stack samples than this in the part weighed are said with their number: a share
# of a few samples names a site by chance.
FEW_SAMPLES = 50


def samples(w: Where, part: str | None) -> int:
    """The stack samples `part` is weighed by: the late window's for time, else all."""
    if part == "time":
        return w.stack_samples[1] or sum(s.late for s in w.stack)
    return sum(w.stack_samples) or sum(s.early + s.late for s in w.stack)


def few(w: Where, part: str | None) -> str:
    """A note where the answer rests on few stack samples or none, else ""."""
    if part not in ("time", "stack", None) or "stack" not in w.kinds:
        return ""
    n = samples(w, part)
    if n >= FEW_SAMPLES:
        return ""
    window = " in its late window" if part == "time" else ""
    return (f" (the stack sampler took {n} sample{'' if n == 1 else 's'}{window} in "
            f"{w.calls:,} calls: too few to rest on)")


def answer(package: str, good: str, bad: str, diff: CodeDiff, files: Sequence[str],
           w: Where, part: str | None, read: tuple[str, ...] = ()) -> CodeAnswer:
    """The change's code against the where record's sites of `part`."""
    got = _answer(package, good, bad, diff, files, w, part, read)
    said = few(w, part)
    return replace(got, words=got.words + said) if said else got


def _answer(package: str, good: str, bad: str, diff: CodeDiff, files: Sequence[str],
            w: Where, part: str | None, read: tuple[str, ...]) -> CodeAnswer:
    head = f"{package} {good} -> {bad}"
    if part is None:
        return CodeAnswer(package, good, bad, NONE, f"{head}: explain attributed nothing "
                          "to read the change against", files=read)
    sites = weighted(w, part)
    by_path: dict[str, list[FunctionChange]] = {}
    for c in diff.functions:
        if c.status in (CHANGED, ADDED) or (c.status == MOVED and c.lines):
            by_path.setdefault(c.path, []).append(c)
    moved = {(c.path, c.function): hit(c) for c in diff.functions if c.status == MOVED}
    # A site's weight goes to its innermost frame in the package (`shares`) and in a
    # changed or added function (`hits`), as explain names sites.
    shares: dict[tuple[str, str], float] = {}
    hits: dict[tuple[str, str], Hit] = {}
    for frames, weight in sites:
        ours = [(p, function(frames, i)) for i, f in enumerate(frames)
                if (p := in_package(f[0], files)) is not None]
        if ours:
            shares[ours[0]] = shares.get(ours[0], 0.0) + weight
        got = next((c for path, fn in ours for c in by_path.get(path, ())
                    if _same(fn, c.function)), None)
        if got is not None:
            was = hits.get((got.path, got.function))
            hits[(got.path, got.function)] = hit(got, weight + (was.share or 0 if was else 0))
    ranked = sorted(hits.values(), key=lambda h: (-(h.share or 0), -h.lines))
    attributed = tuple(sorted((Hit(p, fn, 0, "", s) for (p, fn), s in shares.items()),
                              key=lambda h: -(h.share or 0))[:SHOWN])
    native = sorted({extension_of(f.path) for f in diff.native()
                     if not f.path.endswith(HEADERS) and not NOT_IMPORTED.search(f.path)})
    top = max(sites, key=lambda s: s[1])[0] if sites else ()
    frame = next((f for f in top if is_native(f[0]) or f[0].startswith("<unknown")), None)
    base = CodeAnswer(package, good, bad, "", "", part, sites=attributed, files=read)
    if ranked:
        first, rest = ranked[0], [h for h in ranked[1:SHOWN] if (h.share or 0) >= 0.01]
        words = (f"{head}: {_fn(first)} {first.change()} and holds "
                 f"{_share(first, part)}" + "".join(
                     f"; {_fn(h)} {h.change()}, {_share(h, part)}" for h in rest))
        return replace(base, status=FOUND, words=words, hits=tuple(ranked))
    if diff.native() and (frame is not None or not shares):
        said = frame_words(frame, top)
        return replace(base, status=NATIVE, words=f"{head}: {native_words(diff, native)}; "
                       f"{said}", native=tuple(native), native_frame=said)
    where = " (" + ", ".join(
        f"{_fn(h)} {_share(h, part)}" + (f", {m.change()}" if (
            m := moved.get((h.path, h.function))) is not None else "")
        for h in attributed) + ")"
    modules = {p for p, _ in shares}
    near = [hit(c) for c in sorted(
        (c for c in diff.functions if c.path in modules and (c.status != MOVED or c.lines)),
        key=lambda c: (-c.lines, c.function))[:SHOWN]]
    listed = ", ".join(f"{_fn(h)} {h.change()}" for h in near)
    if near:
        return replace(base, status=ELSEWHERE, words=(
            f"{head}: the attributed functions did not change{where}; changed in their "
            f"modules: {listed}"), hits=tuple(near))
    largest = [hit(c) for c in sorted(
        (c for c in diff.functions if not NOT_IMPORTED.search(c.path)
         and (c.status != MOVED or c.lines)), key=lambda c: (-c.lines, c.function))[:SHOWN]]
    elsewhere = ("; its largest changes: " + ", ".join(
        f"{_fn(h)} {h.change()}" for h in largest)) if largest else ""
    if shares:
        return replace(base, status=UNCHANGED,
                       words=f"{head}: the attributed sites are unchanged{where}{elsewhere}")
    return replace(base, status=OUTSIDE, words=(
        f"{head}: no attributed site runs its Python code (the top one: "
        f"{frame_words(None, top)}){elsewhere}"))


def native_words(diff: CodeDiff, native: Sequence[str]) -> str:
    """"native code changed: extension module `m` (m.c (40 lines), ...)"."""
    largest = sorted(diff.native(), key=lambda f: (-(f.lines or 0), f.path))
    files = ", ".join(f.path + (f" ({lines(f.lines)})" if f.lines is not None else
                                " (binary differs)") for f in largest[:SHOWN])
    more = len(diff.native()) - SHOWN
    named = (f"extension module{'s' if len(native) > 1 else ''} "
             f"{', '.join(f'`{n}`' for n in native[:SHOWN])} " if native else "")
    return f"native code changed: {named}({files}{f', {more} more' if more > 0 else ''})"


def frame_words(frame: Frame | None, top: Sequence[Frame]) -> str:
    """The native frame named, or the Python frame that calls into native code."""
    if frame is not None:
        return f"the attributed frame is native: {frame[2]} in {os.path.basename(frame[0])}"
    if top:
        return f"the attributed site calls into it from {_where(top)}"
    return "no attributed frame"
