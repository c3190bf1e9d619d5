"""Move function-level imports of harness/ (outside harness/agent) to the module top.

Re-runnable on any checkout:

    cd TREE && PYTHONPATH=$PWD python tools/hoist_imports.py [--dry-run] [-v]

then it runs `ruff check --fix --select I,F401` over the files it changed.

An import inside a function moves to the top of its module unless
  - it is listed in KEEP (file, imported module) with its reason, or
  - it stands in a `try:` (an optional dependency, its ImportError handled), or
  - its binding clashes with a different module-level name, or
  - the move would make a circle of module-level imports (tests/unit/test_architecture.py's
    graph: module-level imports, those under `if TYPE_CHECKING:` too), or
  - the move would make one of the start-up scenarios (tests/unit/test_startup.py, run
    here on this tree to see which harness modules each loads) reach a module it must not
    load (numpy, scipy, docker, ... or another command's module), or
  - the move would make docker-py importable other than through
    runtimes.get_runtime (paramiko and charset_normalizer hidden: paramiko_hidden).
An import that stays gets a `# lazy: <reason>` comment above it (unless a comment is
there already). A duplicate of a top-level import is removed.
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import textwrap
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path.cwd()
PKG = ROOT / "harness"
APART = "harness.agent"

# (file, imported module) -> why it stays inside its function. Checked first.
KEEP: dict[tuple[str, str], str] = {
    ("harness/__init__.py", "harness"):
        "`import harness` loads no module of its own (the API on first use)",
    ("harness/cli/__init__.py", "harness.runtimes"):
        "only the hidden `_cell` command (inside a Slurm job) needs it",
    ("harness/cli/sweep.py", "harness.cli"):
        "`harness sweep --help` builds the parser alone: the sweep's run (cli.sweeprun) "
        "loads here",
}
KEEP[("harness/runtimes/dockerengine.py", "docker.transport.sshconn")] = (
    "paramiko (~130 ms) only where an ssh:// engine is asked for")
# Whole files whose harness imports stay lazy, with the reason.
KEEP[("harness/analysis/baseline.py", "scipy")] = KEEP[("harness/analysis/sequential.py", "scipy")] = (
    "SciPy (~1.4 s) only where its p-value is needed: a sweep that never confirms or "
    "stops early never loads it")
KEEP_FILES: dict[str, str] = {
    "harness/runtimes/__init__.py":
        "each runtime loads on first use, docker-py with paramiko and charset_normalizer "
        "hidden (paramiko_hidden)",
    "harness/pytest_plugin.py":
        "the plugin loads in every pytest session; harness only once a marked test runs",
}

HEAVY = {"numpy", "scipy", "docker", "requests", "jinja2", "tabulate", "paramiko", "rich"}
# What an outside package imports in turn (for what a scenario must not load).
EXT_DEPS = {"scipy": {"numpy"}, "docker": {"requests", "paramiko"}}

# The start-up scenarios of tests/unit/test_startup.py: code, and what it must not load
# ("harness.*": no module of harness it does not load now: `harness --help` lists the
# commands from cli.SUMMARIES and stays as light as the entry point; a sweep's start
# loads no plan or answer that only an option (--explain, --find-cause, --between) runs).
SCENARIOS: list[tuple[str, str, set[str]]] = [
    ("`harness --help`",
     "from harness.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass",
     {f"ext:{m}" for m in HEAVY} | {"harness.*"}),
    ("a verdict, the orchestrator, the reports",
     "import harness.analysis.decision, harness.stages.orchestrator, harness.report",
     {"ext:scipy"}),
    ("a sweep before its first container",
     "from harness.cli import build_parser\nbuild_parser('sweep')\n"
     "import harness.cli.sweep, harness.stages.orchestrator, harness.preflight, "
     "harness.report.live, harness.stages.settle\n"
     "from harness.runtimes import get_runtime\nget_runtime('docker')",
     {"ext:numpy", "ext:jinja2", "ext:tabulate", "ext:scipy"}),
    ("`harness sweep --help`",
     "from harness.cli import main\ntry:\n    main(['sweep', '--help'])\nexcept SystemExit:\n"
     "    pass",
     {"harness.cli.doctor", "harness.cli.bisect", "harness.cli.watch",
      "harness.cli.sweeprun", "harness.store", "harness.report"}),
]


# With --guard-sweep-start: a sweep's start (its parser, its run's modules, a local
# runtime) loads no module of harness it does not load now: the plans and answers only an
# option runs (--explain, --find-cause, --between) stay lazy in cli.sweep.
SWEEP_START = [
    ("a sweep's start",
     "from harness.cli import build_parser\nbuild_parser('sweep')\n"
     "import harness.cli.sweep, harness.stages.orchestrator, harness.preflight, "
     "harness.report.live, harness.stages.settle, harness.matrixfile, harness.store\n"
     "from harness.runtimes import get_runtime\nget_runtime('local')",
     {"harness.*"}),
]


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


KNOWN = modules()


def resolve(name: str) -> str | None:
    while name and name not in KNOWN:
        name = name.rpartition(".")[0]
    return name or None


def parents(mod: str) -> list[str]:
    parts = mod.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def targets(node: ast.Import | ast.ImportFrom) -> list[str]:
    """Graph nodes an import reaches: harness modules (as the architecture test resolves
    them) and `ext:<top-level name>` for anything else."""
    names = ([a.name for a in node.names] if isinstance(node, ast.Import)
             else [f"{node.module}.{a.name}" for a in node.names] if node.module else [])
    out = []
    for name in names:
        if name.split(".")[0] == "harness":
            t = resolve(name)
            if t:
                out.append(t)
            lazy = LAZY_NAMES.get(tuple(name.rsplit(".", 1)))
            if lazy:                # a package's PEP 562 __getattr__ imports it on use
                out.append(lazy)
        else:
            out.append("ext:" + name.split(".")[0])
    return out


# (package, name) -> module, for names a package's module-level __getattr__ imports on
# first use (declared under `if TYPE_CHECKING:` for the type checker).
LAZY_NAMES: dict[tuple[str, ...], str] = {}


def is_type_checking(node: ast.If) -> bool:
    return ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def module_level(body: list[ast.stmt], typing_too: bool):
    for node in body:
        if isinstance(node, ast.If):
            if is_type_checking(node) and not typing_too:
                yield from module_level(node.orelse, typing_too)
            else:
                yield from module_level(node.body + node.orelse, typing_too)
        elif isinstance(node, ast.Try):
            yield from module_level(node.body + node.orelse + node.finalbody
                                    + [s for h in node.handlers for s in h.body], typing_too)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


@dataclass
class Cand:
    mod: str
    rel: str
    node: ast.Import | ast.ImportFrom
    func: ast.FunctionDef | ast.AsyncFunctionDef
    block: list[ast.stmt]
    in_try: bool
    decision: str = ""          # "hoist", "dup", "keep"
    reason: str = ""


@dataclass
class Module:
    name: str
    path: Path
    rel: str
    text: str
    tree: ast.Module
    cands: list[Cand] = field(default_factory=list)
    # name -> origin key of the module-level binding; TYPE_CHECKING ones apart
    bound: dict[str, str] = field(default_factory=dict)
    typing_bound: dict[str, tuple[ast.ImportFrom | ast.Import, ast.alias]] = field(
        default_factory=dict)
    added: list[str] = field(default_factory=list)       # import lines to add at the top
    untyped: list[tuple[ast.stmt, ast.alias]] = field(default_factory=list)


def origin(node: ast.Import | ast.ImportFrom, alias: ast.alias) -> tuple[str, str]:
    """(bound name, where it comes from)."""
    if isinstance(node, ast.ImportFrom):
        return alias.asname or alias.name, f"from {node.module} import {alias.name}"
    if alias.asname:
        return alias.asname, f"import {alias.name}"
    top = alias.name.split(".")[0]
    return top, f"import {top}"


def bindings(tree: ast.Module, m: Module) -> None:
    def walk(body: list[ast.stmt], typing: bool) -> None:
        for node in body:
            if isinstance(node, ast.If):
                walk(node.body, typing or is_type_checking(node))
                walk(node.orelse, typing)
            elif isinstance(node, ast.Try):
                for b in (node.body, node.orelse, node.finalbody, *[h.body for h in node.handlers]):
                    walk(b, typing)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    name, src = origin(node, a)
                    if typing:
                        m.typing_bound[name] = (node, a)
                    else:
                        m.bound[name] = src
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                m.bound[node.name] = "local"
            else:
                for t in ast.walk(node):
                    if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store):
                        m.bound[t.id] = "local"
    walk(tree.body, False)


def catches(node: ast.Try) -> bool:
    """Whether a try handles a failed import (an optional dependency)."""
    for h in node.handlers:
        if h.type is None:
            return True
        names = {ast.unparse(t) for t in (h.type.elts if isinstance(h.type, ast.Tuple)
                                          else [h.type])}
        if names & {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}:
            return True
    return False


def floors() -> list[str]:
    """ARCHITECTURE.md's floor list, top first (the order moves are tried in: an upper
    module's import moves before a lower module's import of something heavy)."""
    import re
    text = " ".join((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8").split())
    found = re.search(r"of lower floors of this list \(([^;)]*)", text)
    out: list[str] = []
    if found:
        words = re.sub(r"\s+at the bottom$", "", found.group(1))
        for item in words.split(","):
            item = re.sub(r"^\s*and\s+", "", item)
            out.append(item.strip())
    return out


def floor_index(mod: str, fl: list[str]) -> int:
    head = mod.split(".")[1] if "." in mod else ""
    for i, item in enumerate(fl):
        if head in {n.strip() for n in item.split("/")}:
            return i
    return len(fl)


def collect() -> dict[str, Module]:
    out = {}
    for name, path in KNOWN.items():
        if name == APART or name.startswith(APART + "."):
            continue
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        m = Module(name, path, str(path.relative_to(ROOT)), text, tree)
        bindings(tree, m)
        if "__getattr__" in m.bound:
            for tname, (tnode, talias) in m.typing_bound.items():
                if isinstance(tnode, ast.ImportFrom) and (tnode.module or "").startswith(
                        "harness"):
                    t = resolve(f"{tnode.module}.{talias.name}")
                    if t:
                        LAZY_NAMES[(name, tname)] = t

        def visit(body: list[ast.stmt], func, in_try: bool) -> None:
            for node in body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    visit(node.body, node, False)
                    continue
                if isinstance(node, ast.ClassDef):
                    visit(node.body, None, False)
                    continue
                if isinstance(node, (ast.Import, ast.ImportFrom)) and func is not None:
                    m.cands.append(Cand(name, m.rel, node, func, body, in_try))
                    continue
                for attr in ("body", "orelse", "finalbody"):
                    sub = getattr(node, attr, None)
                    if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                        visit(sub, func, in_try or (isinstance(node, ast.Try)
                                                    and attr == "body" and catches(node)))
                for h in getattr(node, "handlers", []):
                    visit(h.body, func, in_try)
                if isinstance(node, ast.Match):
                    for c in node.cases:
                        visit(c.body, func, in_try)
        visit(tree.body, None, False)
        out[name] = m
    return out


def graphs(mods: dict[str, Module]):
    static: dict[str, set[str]] = defaultdict(set)     # the architecture test's circles
    runtime: dict[str, set[str]] = defaultdict(set)    # what importing a module loads
    for name, m in mods.items():
        for node in module_level(m.tree.body, True):
            static[name].update(t for t in targets(node) if not t.startswith("ext:") and t != name)
        for node in module_level(m.tree.body, False):
            for t in targets(node):
                runtime[name].add(t)
                runtime[name].update(parents(t) if not t.startswith("ext:") else ())
        runtime[name].update(parents(name))
        runtime[name].discard(name)
    for ext, deps in EXT_DEPS.items():
        runtime["ext:" + ext].update("ext:" + d for d in deps)
    return static, runtime


def reach(graph: dict[str, set[str]], starts, skip=frozenset()) -> set[str]:
    seen = set(starts)
    todo = list(starts)
    while todo:
        v = todo.pop()
        for w in graph.get(v, ()):
            if w not in seen and (v, w) not in skip:
                seen.add(w)
                todo.append(w)
    return seen


def scenario_roots() -> list[tuple[str, set[str], set[str]]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = []
    for what, code, forbidden in SCENARIOS:
        run = subprocess.run([sys.executable, "-c", code + "\nimport sys\n"
                              "print(' '.join(m for m in sys.modules if m.startswith('harness')))"],
                             env=env, capture_output=True, text=True, cwd=ROOT, check=True)
        out.append((what, set(run.stdout.split()), forbidden))
    return out


def decide(mods: dict[str, Module], verbose: bool) -> None:
    static, runtime = graphs(mods)
    scen = scenario_roots()
    docker_ok = {m for m in mods if m.startswith("harness.runtimes.docker")
                 or m == "harness.runtimes.podman"}
    fl = floors()
    order = sorted(mods.values(), key=lambda m: (floor_index(m.name, fl), m.rel))
    for m in order:
        for c in m.cands:
            key = c.rel
            mod_names = ([a.name for a in c.node.names] if isinstance(c.node, ast.Import)
                         else [c.node.module or ""])
            kept = [KEEP[(key, n)] for n in mod_names if (key, n) in KEEP]
            tg = targets(c.node)
            if kept:
                c.decision, c.reason = "keep", kept[0]
                continue
            if key in KEEP_FILES and any(t.startswith("harness") for t in tg):
                c.decision, c.reason = "keep", KEEP_FILES[key]
                continue
            if c.in_try:
                c.decision, c.reason = "keep", "optional: its ImportError is handled here"
                continue
            # bindings
            clash = None
            dup = True
            untype = []
            for a in c.node.names:
                name, src = origin(c.node, a)
                have = m.bound.get(name)
                if have is None:
                    dup = False
                    if name in m.typing_bound:
                        tnode, talias = m.typing_bound[name]
                        if origin(tnode, talias)[1] == src:
                            untype.append((tnode, talias))
                        else:
                            clash = name
                elif have != src:
                    clash = name
                elif isinstance(c.node, ast.Import) and a.asname is None and "." in a.name:
                    dup = dup and f"import {a.name}" in m.bound.values()
            if clash:
                c.decision, c.reason = "keep", f"`{clash}` is another name at module level"
                continue
            # circles (the architecture test's graph)
            new = [t for t in tg if not t.startswith("ext:") and t != m.name]
            circle = next((t for t in new if m.name in reach(static, [t])), None)
            if circle:
                c.decision, c.reason = "keep", f"{circle} leads back here: a circle of module-level imports"
                continue
            # what it would load
            trial = {k: set(v) for k, v in runtime.items()}
            for t in tg:
                trial[m.name].add(t)
                if not t.startswith("ext:"):
                    trial[m.name].update(parents(t))
            trial[m.name].discard(m.name)
            why = None
            for what, roots, forbidden in scen:
                skip: set[tuple[str, str]] = set()
                if m.name not in reach(runtime, roots, skip):
                    continue
                new_here = reach(trial, roots, skip) - reach(runtime, roots, skip)
                bad = sorted(new_here & forbidden)
                if not bad and "harness.*" in forbidden and any(
                        n.startswith("harness") for n in new_here):
                    own = ", ".join(dict.fromkeys(t.removeprefix("harness.") for t in tg
                                                  if t.startswith("harness")))
                    why = f"{what} loads no more of harness than it does now ({own}: later)"
                    break
                if bad:
                    names = ", ".join(b.removeprefix("ext:") for b in bad[:3])
                    names += ", ..." if len(bad) > 3 else ""
                    why = f"{what} must not load {names}"
                    break
            gained = reach(trial, [m.name]) - reach(runtime, [m.name])
            if why is None and m.name not in docker_ok and "ext:docker" in gained:
                why = "docker-py is imported through runtimes.get_runtime, on first use"
            elif why is None and "ext:requests" in gained:
                why = ("requests (with its charset detector, ~30-70 ms, unless "
                       "paramiko_hidden hid it) only where the network is asked")
            if why:
                c.decision, c.reason = "keep", why
                continue
            runtime = trial
            for t in new:
                static[m.name].add(t)
            c.decision = "dup" if dup else "hoist"
            if not dup:
                for a in c.node.names:
                    name, src = origin(c.node, a)
                    m.bound[name] = src
                    m.typing_bound.pop(name, None)
                m.untyped.extend(untype)
                line = ast.unparse(c.node)
                if line not in m.added:
                    m.added.append(line)
            if verbose:
                print(f"{c.rel}:{c.node.lineno}: {c.decision}: {ast.unparse(c.node)}")


def lazy_comment(lines: list[str], lineno: int) -> range:
    """The 0-based lines of the `# lazy:` comment this script wrote over line `lineno`."""
    k = lineno - 2
    while k >= 0 and lines[k].lstrip().startswith("#"):
        if lines[k].lstrip().startswith("# lazy:"):
            return range(k, lineno - 1)
        k -= 1
    return range(0)


def edit(m: Module) -> bool:
    lines = m.text.splitlines(keepends=True)
    drop: set[int] = set()          # 0-based line indexes
    replace: dict[int, str] = {}
    insert_before: dict[int, list[str]] = defaultdict(list)
    moved = [c for c in m.cands if c.decision in ("hoist", "dup")]
    moved_ids = {id(c.node) for c in moved}
    for c in moved:
        block = c.block
        i = next(k for k, s in enumerate(block) if s is c.node)
        for k in range(c.node.lineno - 1, c.node.end_lineno):
            drop.add(k)
        drop.update(lazy_comment(lines, c.node.lineno))
        rest = [s for s in block if id(s) not in moved_ids]
        if not rest or (len(rest) == 1 and isinstance(rest[0], ast.Expr)
                        and isinstance(rest[0].value, ast.Constant) and block is c.func.body
                        and rest[0] is block[0]):
            if c.node is [s for s in block if id(s) in moved_ids][-1]:
                indent = lines[c.node.lineno - 1][:c.node.col_offset]
                drop.discard(c.node.lineno - 1)
                for k in range(c.node.lineno, c.node.end_lineno):
                    drop.add(k)
                replace[c.node.lineno - 1] = indent + "pass\n"
            continue
        # the run of moved imports this one belongs to: if it leads its block (after a
        # docstring) or follows a blank line, the blank lines after it go too
        j = i
        while j + 1 < len(block) and id(block[j + 1]) in moved_ids:
            j += 1
        if j != i:
            continue                # the last of the run decides
        k0 = i
        while k0 - 1 >= 0 and id(block[k0 - 1]) in moved_ids:
            k0 -= 1
        before = block[k0 - 1] if k0 > 0 else None
        leads = before is None or (k0 == 1 and isinstance(before, ast.Expr)
                                   and isinstance(before.value, ast.Constant))
        first = block[k0].lineno - 1
        blank_before = first > 0 and not lines[first - 1].strip()
        if leads or blank_before:
            k = c.node.end_lineno
            while k < len(lines) and not lines[k].strip():
                drop.add(k)
                k += 1
    # comments over the imports that stay
    for c in m.cands:
        if c.decision != "keep":
            continue
        i = next(k for k, s in enumerate(c.block) if s is c.node)
        prev = c.block[i - 1] if i else None
        if (prev is not None and isinstance(prev, (ast.Import, ast.ImportFrom))
                and prev.end_lineno == c.node.lineno - 1 and any(
                    p.node is prev and p.decision == "keep" and p.reason == c.reason
                    for p in m.cands)):
            continue
        line = lines[c.node.lineno - 1]
        indent = line[:c.node.col_offset]
        width = 100 - len(indent) - 2
        text = [f"{indent}# {t}\n" for t in textwrap.wrap("lazy: " + c.reason, width)]
        ours = lazy_comment(lines, c.node.lineno)
        if ours:
            if [lines[k] for k in ours] != text:
                drop.update(ours)
                insert_before[c.node.lineno - 1] = text
            continue
        above = lines[c.node.lineno - 2].strip() if c.node.lineno > 1 else ""
        if above.startswith("#") or "#" in line:
            continue
        insert_before[c.node.lineno - 1] = text
    # TYPE_CHECKING names now imported at the top
    for node, alias in m.untyped:
        keep = [a for a in node.names if a is not alias]
        node.names = keep
    for node, _ in m.untyped:
        indent = lines[node.lineno - 1][:node.col_offset]
        for k in range(node.lineno - 1, node.end_lineno):
            drop.add(k)
        if node.names:
            drop.discard(node.lineno - 1)
            replace[node.lineno - 1] = indent + ast.unparse(node) + "\n"
    # empty `if TYPE_CHECKING:` blocks
    for node in m.tree.body:
        if isinstance(node, ast.If) and is_type_checking(node) and not node.orelse:
            gone = all(all(k in drop for k in range(s.lineno - 1, s.end_lineno))
                       and (s.lineno - 1) not in replace for s in node.body)
            if gone:
                for k in range(node.lineno - 1, node.end_lineno):
                    drop.add(k)
                k = node.end_lineno
                while k < len(lines) and not lines[k].strip():
                    drop.add(k)
                    k += 1
    # the new imports, after the first block of imports at the top
    top = [s for s in m.tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
    if m.added:
        if top:
            after = top[0].end_lineno
            body = m.tree.body
            i = body.index(top[0])
            while i + 1 < len(body) and isinstance(body[i + 1], (ast.Import, ast.ImportFrom)):
                i += 1
                after = body[i].end_lineno
            insert_at, prefix = after, ""
        else:
            first = m.tree.body[0]
            doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            insert_at, prefix = (first.end_lineno if doc else 0), "\n"
        insert_before.setdefault(insert_at, [])
        insert_before[insert_at] = ([prefix] if prefix else []) + [
            a + "\n" for a in m.added] + (["\n"] if prefix else []) + insert_before[insert_at]
    if not (drop or replace or insert_before):
        return False
    out = []
    for k in range(len(lines) + 1):
        out.extend(insert_before.get(k, []))
        if k == len(lines):
            break
        if k in replace:
            out.append(replace[k])
        elif k not in drop:
            out.append(lines[k])
    text = "".join(out)
    if text == m.text:
        return False
    m.path.write_text(text, encoding="utf-8")
    return True


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--guard-sweep-start", action="store_true",
                    help="also keep lazy what would add modules to a sweep's start")
    args = ap.parse_args()
    if args.guard_sweep_start:
        SCENARIOS[1:1] = SWEEP_START
    if not (PKG / "cli").is_dir():
        sys.exit("run from the repository root (harness/ below it)")
    mods = collect()
    decide(mods, args.verbose)
    counts = defaultdict(lambda: [0, 0])
    kept = []
    for m in mods.values():
        for c in m.cands:
            folder = m.rel.split("/")[1] if m.rel.count("/") > 1 else "(top)"
            counts[folder][0] += 1
            if c.decision == "keep":
                counts[folder][1] += 1
                kept.append(f"{c.rel}:{c.node.lineno}: {ast.unparse(c.node)}  # {c.reason}")
    print("kept lazy:")
    print("\n".join("  " + k for k in kept))
    print("by folder (before -> after):")
    for f, (a, b) in sorted(counts.items()):
        print(f"  {f}: {a} -> {b}")
    print(f"  all: {sum(a for a, _ in counts.values())} -> {len(kept)}")
    if args.dry_run:
        return 0
    changed = [m.rel for m in mods.values() if edit(m)]
    print(f"changed {len(changed)} files")
    if changed:
        subprocess.run(["ruff", "check", "--fix", "--select", "I,F401", "-q", *changed],
                       cwd=ROOT, check=False)
        # an import gone from between two `if`s leaves them one `if` (ruff calls the fix
        # unsafe only where it would drop a comment, which it then leaves alone)
        subprocess.run(["ruff", "check", "--fix", "--unsafe-fixes", "--select", "SIM102",
                        "-q", *changed], cwd=ROOT, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
