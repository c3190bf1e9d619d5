"""ARCHITECTURE.md's import layering, held against the code.

ARCHITECTURE.md lists the floors of `harness/`, top first, in one sentence ("Every module
imports only modules of its own floor or of lower floors of this list (cli, ..., and
... at the bottom; ...)"). Read from there, so the document and this test cannot
drift apart:

- every module under `harness/` stands on a floor of that list, and every name on the
  list is a module or folder of `harness/`;
- no import runs back up: a module imports only modules of its own floor or lower ones.
  Every `import` counts, wherever it stands (inside a function, under
  `if TYPE_CHECKING:`), and so does `importlib.import_module("harness....")` with a
  literal name; a name built at run time is not seen;
- no circle: no modules import each other in a loop (the strongly connected groups of
  the module graph). Every import counts here too: one inside a function only puts off
  when the other module loads, not that each needs the other, and one under
  `if TYPE_CHECKING:` is followed by type checkers and readers.

`harness/agent/` is left out: it is stdlib only and copied into images on its own.
`python -m harness` (`__main__`) stands above every floor; the package's own
`__init__` (its version) imports nothing but the Python API, `harness.api`, on first use.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APART = "harness.agent"
# The modules of the agent the host imports, standing at the bottom: the protocol's
# field names (plain tuples, stdlib only), so both sides name fields from one list, and
# the scenario file's check (`preflight` runs it before any image, the agent inside it).
SHARED = ("harness.agent.fields", "harness.agent.scenariofile")
ENTRY = "harness.__main__"
# The package's `__init__` hands on the Python API (`harness.check`, `harness.sweep`),
# imported on first use: the one import up from the ground.
HANDED_ON = "harness.api"
SENTENCE = re.compile(r"imports only modules of its own floor or of lower floors of this list\s*"
                      r"\(([^;)]*)")


def floors(text: str) -> list[set[str]]:
    """The floor list of ARCHITECTURE.md's text, top first; names sharing a floor are
    written `a / b`, the last floor ends `at the bottom`."""
    found = SENTENCE.search(text)
    if found is None:
        raise AssertionError("ARCHITECTURE.md has no sentence 'Every module imports only "
                             "modules of its own floor or of lower floors of this list (...)'")
    words = " ".join(found.group(1).split())
    words = re.sub(r"\s+at the bottom$", "", words)
    out = []
    for item in words.split(","):
        item = re.sub(r"^\s*and\s+", "", item)
        out.append({name.strip() for name in item.split("/") if name.strip()})
    return out


def modules(root: Path) -> dict[str, Path]:
    """Every module under root/harness by dotted name (a package by its own name)."""
    out = {}
    for path in sorted((root / "harness").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The module an imported name lives in: `harness.gpu.LOG_SIGNS` -> `harness.gpu`."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _named(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module is not None:
        base = node.module if node.level == 0 else ""   # harness/ uses absolute imports
        return [f"{base}.{alias.name}" for alias in node.names] if base else []
    if (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (getattr(node.func, "attr", None) == "import_module"
                 or getattr(node.func, "id", None) in ("import_module", "__import__"))):
        return [node.args[0].value]
    return []


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements run when the module is imported, `if`/`try` blocks opened."""
    for node in body:
        if isinstance(node, ast.If):
            yield from _module_level(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            yield from _module_level(node.body + node.orelse + node.finalbody
                                     + [s for h in node.handlers for s in h.body])
        else:
            yield node


def imports(path: Path, known: dict[str, Path], everywhere: bool) -> list[tuple[str, int]]:
    """(module of this tree, line) for each import of `path`: all of them, or with
    `everywhere=False` only those made at module level."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    nodes = ast.walk(tree) if everywhere else _module_level(tree.body)
    out = []
    for node in nodes:
        for name in _named(node):
            if name.split(".")[0] == "harness":
                target = _resolve(name, known)
                if target is not None:
                    out.append((target, getattr(node, "lineno", 0)))
    return out


def floor_of(module: str, names: list[set[str]]) -> int | None:
    """The index of the module's floor (0 is the top); the package root is the ground.
    The longest name on the list that the module is, or stands in, places it: a folder
    (`fit`) places its modules, and one of them named on its own (`fit.page`) stands on
    its own floor."""
    if module == "harness":
        return len(names)
    if module in SHARED:
        return len(names) - 1
    parts = module.split(".")[1:]
    for k in range(len(parts), 0, -1):
        name = ".".join(parts[:k])
        found = next((i for i, floor in enumerate(names) if name in floor), None)
        if found is not None:
            return found
    return None


def layering_faults(root: Path, names: list[set[str]]) -> list[str]:
    """Modules on no floor, and imports that run back up, as readable lines."""
    known = modules(root)
    faults = []
    for module, path in known.items():
        if module in (ENTRY, APART) or module.startswith(APART + "."):
            continue
        here = floor_of(module, names)
        rel = path.relative_to(root)
        if here is None:
            faults.append(f"{rel}: on no floor; name `{module.split('.')[1]}` in "
                          "ARCHITECTURE.md's floor list")
            continue
        for target, line in imports(path, known, everywhere=True):
            if module == "harness" and target == HANDED_ON:
                continue
            there = floor_of(target, names)
            if target == ENTRY or there is None or there < here:
                faults.append(f"{rel}:{line} imports {target}, a floor above its own")
    return faults


def circles(root: Path) -> list[list[str]]:
    """Groups of modules that import each other in a loop, each sorted, through any of
    their imports (at module level, under `if TYPE_CHECKING:`, inside a function)."""
    known = modules(root)
    graph = {m: sorted({t for t, _ in imports(p, known, everywhere=True) if t != m})
             for m, p in known.items() if not (m == APART or m.startswith(APART + "."))}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:      # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in graph:
        if v not in index:
            visit(v)
    return sorted(found)


@pytest.fixture(scope="module")
def floor_list() -> list[set[str]]:
    return floors((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8"))


def test_every_floor_named_is_a_part_of_harness(floor_list: list[set[str]]) -> None:
    heads = {".".join(m.split(".")[1:k]) for m in modules(ROOT) if m != "harness"
             for k in range(2, len(m.split(".")) + 1)}
    named = set().union(*floor_list)
    assert len(floor_list) >= 10 and "cli" in floor_list[0]
    assert sorted(named - heads) == []


def test_floors_are_drawn_by_folder(floor_list: list[set[str]]) -> None:
    """Issue 88 item 5: a floor is whole folders, or modules standing alone in harness/;
    a module inside a folder never stands on a floor of its own (`fit.page` above `fit`),
    so the map a reader draws by folder is the one the imports hold."""
    inside = sorted(name for floor in floor_list for name in floor if "." in name)
    assert inside == [], f"{inside}: name their folders in ARCHITECTURE.md's floor list"


def test_no_import_runs_back_up(floor_list: list[set[str]]) -> None:
    assert layering_faults(ROOT, floor_list) == []


def test_no_import_circles() -> None:
    """The last one was broken by issue 79: the pytest plugin loads `api.marked` once a
    marked test runs, and both take the plugin's names from `pytestcall` below them."""
    assert circles(ROOT) == []


def test_the_package_root_imports_nothing_of_its_own() -> None:
    known = modules(ROOT)
    assert {t for t, _ in imports(known["harness"], known, everywhere=True)} <= {HANDED_ON}
    # ... and that only when asked for it: `import harness` loads no module of its own.
    code = "import harness, sys; print(sorted(m for m in sys.modules if m.startswith('harness')))"
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    assert out.strip() == "['harness']"


# ---------------------------------------------------------------- the checks can fail
def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


def test_floors_are_read_from_the_sentence() -> None:
    text = ("Every module imports only modules of its own floor or of lower floors of this "
            "list (cli, report,\nanalysis, and errors / signals at the bottom; the agent "
            "apart): no import runs back up.")
    assert floors(text) == [{"cli"}, {"report"}, {"analysis"}, {"errors", "signals"}]
    with pytest.raises(AssertionError, match="no sentence"):
        floors("Every module imports only modules on lower floors (cli, errors)")


def test_a_backward_import_is_found_wherever_it_stands(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "harness/__init__.py": "",
        "harness/cli.py": "import harness.low\n",
        "harness/low.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                           "    from harness.cli import main\n"),
        "harness/mid/__init__.py": "",
        "harness/mid/a.py": "def f():\n    from harness import cli\n",
        "harness/mid/b.py": "import importlib\nimportlib.import_module('harness.cli')\n",
        "harness/stray.py": "",
        "harness/agent/agent.py": "import harness.cli\n",
    })
    faults = layering_faults(root, [{"cli"}, {"mid"}, {"low"}])
    assert [f.split(" ")[0] for f in faults] == [
        "harness/low.py:3", "harness/mid/a.py:2", "harness/mid/b.py:2", "harness/stray.py:"]


def test_a_module_named_on_its_own_stands_on_its_floor(tmp_path: Path) -> None:
    """A feature folder below `report` whose page stands above it: the page may import
    `report`, the folder's other modules may not, and the folder may not import its page."""
    root = _tree(tmp_path, {
        "harness/__init__.py": "",
        "harness/report.py": "import harness.fit.plan\n",
        "harness/fit/__init__.py": "",
        "harness/fit/plan.py": "",
        "harness/fit/page.py": "import harness.report\nimport harness.fit.plan\n",
        "harness/fit/steps.py": "import harness.report\n",
        "harness/fit/words.py": "import harness.fit.page\n",
    })
    names = [{"fit.page"}, {"report"}, {"fit"}]
    assert floor_of("harness.fit.page", names) == 0 and floor_of("harness.fit.steps", names) == 2
    assert [f.split(" ")[0] for f in layering_faults(root, names)] == [
        "harness/fit/steps.py:1", "harness/fit/words.py:1"]


def test_a_circle_is_found_wherever_its_imports_stand(tmp_path: Path) -> None:
    """Through a TYPE_CHECKING import, a lazy one inside a function, and three modules
    round; a chain with no way back is none."""
    root = _tree(tmp_path, {
        "harness/__init__.py": "",
        "harness/matrixfile/__init__.py": "",
        "harness/matrixfile/load.py": "from harness.matrixfile.cells import expand\n",
        "harness/matrixfile/cells.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                   "    from harness.matrixfile.load import Ctx\n"),
        "harness/a.py": "import harness.b\n",
        "harness/b.py": "def f():\n    import harness.a\n",
        "harness/c.py": "from harness import d\n",
        "harness/d.py": "import harness.e\n",
        "harness/e.py": ("def f():\n    import importlib\n"
                         "    importlib.import_module('harness.c')\n"),
        "harness/f.py": "import harness.c\nimport harness.a\n",
    })
    assert circles(root) == [["harness.a", "harness.b"], ["harness.c", "harness.d", "harness.e"],
                             ["harness.matrixfile.cells", "harness.matrixfile.load"]]


def test_one_registry_of_runtime_names() -> None:
    """Issue 22 point 2: the matrix's names, the CLI's choices and the factories agree,
    and every runtime declares its abilities through RuntimeBase (no getattr probing)."""
    from harness.matrixfile.model import RUNTIMES
    from harness.runtimes import FACTORIES, NAMES
    from harness.runtimes.base import RuntimeBase
    from harness.runtimes.docker import DockerRuntime
    from harness.runtimes.local import LocalRuntime
    from harness.runtimes.slurm import SlurmRuntime

    assert set(FACTORIES) == set(RUNTIMES) and tuple(NAMES) == tuple(RUNTIMES)
    for cls in (DockerRuntime, LocalRuntime, SlurmRuntime):
        assert issubclass(cls, RuntimeBase), cls
    orchestrator = (Path(__file__).resolve().parents[2] / "harness" / "stages"
                    / "orchestrator.py")
    assert "getattr(" not in orchestrator.read_text()
    # What each runtime can do is one declaration (`Capabilities`), which doctor asks.
    assert DockerRuntime.probes_gpus and DockerRuntime.builds_hybrids
    assert LocalRuntime.resolves_days and not LocalRuntime.probes_gpus
    assert SlurmRuntime.queues_cells and not SlurmRuntime.builds_hybrids
    doctor = ROOT / "harness" / "cli" / "doctor.py"
    assert "getattr(" not in doctor.read_text() and "hasattr(" not in doctor.read_text()


# Issue 88 item 3: one engine interface, as httpx's BaseTransport. What an engine can do
# is asked of it (`runtimes.base.Runtime`: its `Capabilities`, its methods); no module
# outside harness/runtimes/ names a concrete runtime class, to build one, test for one
# (isinstance) or cast to one.
def concrete_runtimes(root: Path) -> set[str]:
    """The runtime classes of harness/runtimes/: `RuntimeBase`'s subclasses, at any depth
    (`PodmanRuntime(DockerRuntime)` too)."""
    bases: dict[str, set[str]] = {}
    for path in sorted((root / "harness" / "runtimes").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                bases[node.name] = {_dotted(b).rpartition(".")[2] for b in node.bases}
    found = {"RuntimeBase"}
    while new := {name for name, of in bases.items() if of & found} - found:
        found |= new
    return found - {"RuntimeBase"}


def runtime_namers(root: Path) -> list[str]:
    """Where a module outside harness/runtimes/ (the agent apart) names a concrete runtime
    class: imported, called, tested for or cast to (`cast("LocalRuntime", x)`); a
    docstring's mention is no use of it."""
    names = concrete_runtimes(root)
    faults = []
    for module, path in modules(root).items():
        if module.startswith(("harness.runtimes", APART)):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            said = (node.id if isinstance(node, ast.Name)
                    else node.attr if isinstance(node, ast.Attribute)
                    else node.name.rpartition(".")[2] if isinstance(node, ast.alias)
                    else node.value if isinstance(node, ast.Constant)
                    and isinstance(node.value, str) else None)
            if said in names:
                faults.append(f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)} names "
                              f"{said}: ask the runtime (runtimes.base.Runtime) instead")
    return sorted(set(faults))


def test_nothing_outside_the_runtimes_names_a_runtime_class() -> None:
    assert {"DockerRuntime", "LocalRuntime", "PodmanRuntime", "SlurmRuntime"} \
        <= concrete_runtimes(ROOT)
    assert runtime_namers(ROOT) == []


def test_a_runtime_class_named_outside_the_runtimes_is_found(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "harness/__init__.py": "",
        "harness/runtimes/__init__.py": "from harness.runtimes.local import LocalRuntime\n",
        "harness/runtimes/base.py": "class RuntimeBase:\n    pass\n",
        "harness/runtimes/local.py": ("from harness.runtimes.base import RuntimeBase\n"
                                      "class LocalRuntime(RuntimeBase):\n    pass\n"),
        "harness/runtimes/docker.py": ("from harness.runtimes import base\n"
                                       "class DockerRuntime(base.RuntimeBase):\n    pass\n"
                                       "class PodmanRuntime(DockerRuntime):\n    pass\n"),
        "harness/api/run.py": ("from harness.runtimes.local import LocalRuntime\n"
                               "def f(rt):\n    '''Not LocalRuntime's way.'''\n"
                               "    return isinstance(rt, LocalRuntime)\n"),
        "harness/days/search.py": ("from typing import cast\n"
                                   "import harness.runtimes.docker as d\n"
                                   "def f(rt):\n    cast('DockerRuntime', rt)\n"
                                   "    return d.PodmanRuntime()\n"),
        "harness/stages/ok.py": "def f(rt):\n    return rt.capabilities.resolves_days\n",
    })
    assert concrete_runtimes(root) == {"LocalRuntime", "DockerRuntime", "PodmanRuntime"}
    assert [f.split(" ")[0] for f in runtime_namers(root)] == [
        "harness/api/run.py:1", "harness/api/run.py:4", "harness/days/search.py:4",
        "harness/days/search.py:5"]


def test_the_stage_list_is_the_one_architecture_md_draws() -> None:
    """ARCHITECTURE.md's pipeline names the stages a cell goes through, in order; they
    are the functions `stages.measure.STAGES` runs."""
    from harness.stages.measure import STAGES

    text = (Path(__file__).resolve().parents[2] / "ARCHITECTURE.md").read_text()
    drawn = re.search(r"one CellRun through the stages in order\s*\n\s*(.+)\n", text)
    assert drawn is not None, "ARCHITECTURE.md lost its line of stages"
    assert drawn.group(1).split(" -> ") == [f.__name__ for f in STAGES]


# ------------------------------------------ the rules ARCHITECTURE.md states, held
# Each rule is a function over a tree of files (so a test below can break it in a
# scratch tree and see it found) and a test over this repository.
COMMAND_LINES = 40      # a command parses, calls the layer below and renders
SPAWNER = "harness.runtimes.process"
# Inside the cell, the agent's safety stop forks its watchdog, and the fork server forks
# each run of `harness.check` (the agent runs apart from the host's modules, stdlib only).
AGENT_SPAWNERS = ("harness.agent.watchdog", "harness.agent.forkserver", "harness.agent.asuser")
SPAWNING = ("subprocess.Popen", "subprocess.run", "subprocess.call", "subprocess.check_call",
            "subprocess.check_output", "subprocess.getoutput", "subprocess.getstatusoutput",
            "os.system", "os.popen", "os.fork", "os.forkpty", "os.exec", "os.spawn",
            "os.posix_spawn", "pty.fork", "pty.spawn", "multiprocessing.",
            "asyncio.create_subprocess_", "concurrent.futures.ProcessPoolExecutor")


def said() -> str:
    """ARCHITECTURE.md's text, its line breaks and runs of spaces one space."""
    return " ".join((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8").split())


def commands(root: Path) -> dict[str, ast.FunctionDef]:
    """Each command's function, `path:name`: what a module of harness/cli/ hands
    `set_defaults(func=...)`."""
    out = {}
    for path in sorted((root / "harness" / "cli").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "set_defaults":
                for kw in node.keywords:
                    if kw.arg == "func" and isinstance(kw.value, ast.Name):
                        out[f"{path.relative_to(root)}:{kw.value.id}"] = defs[kw.value.id]
    return out


def long_commands(root: Path, limit: int = COMMAND_LINES) -> list[str]:
    """Commands whose function is longer than `limit` lines, with their length."""
    return [f"{where} is {n} lines (at most {limit}: move the work to a function)"
            for where, f in commands(root).items()
            if (n := (f.end_lineno or f.lineno) - f.lineno + 1) > limit]


def unchecked_commands(root: Path) -> list[str]:
    """Commands whose first statement (after the docstring and imports) is not
    `options.check(args)`."""
    faults = []
    for where, f in commands(root).items():
        body = [s for s in f.body if not isinstance(s, (ast.Import, ast.ImportFrom))
                and not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        first = body[0] if body else None
        call = first.value if isinstance(first, ast.Expr) else None
        if not (isinstance(call, ast.Call) and ast.unparse(call.func) == "options.check"
                and [ast.unparse(a) for a in call.args] == [f.args.args[0].arg]):
            faults.append(f"{where} does not call options.check({f.args.args[0].arg}) first")
    return faults



# An answer's command (cli/<command>.py) parses, calls its folder's `app` and prints,
# with its folder's `page` and the report's renderers: the work is in the folder.
# An answer's command and the module that does its work.
ANSWER_COMMANDS = {"culprit": "culprit.app", "day": "days.search", "explain": "explain",
                   "fit": "fit", "history": "history"}


def commands_doing_work(root: Path) -> list[str]:
    """Imports of an answer's command module beyond the CLI, its JSON answer
    (`app.answer`), the errors, the report's renderers and the module that does its work."""
    known = modules(root)
    faults = []
    for command, home in ANSWER_COMMANDS.items():
        path = root / "harness" / "cli" / f"{command}.py"
        allowed = ("harness.cli", "harness.app.answer", "harness.errors", "harness.report",
                   f"harness.{home}")
        for target, line in imports(path, known, everywhere=True):
            if not any(target == a or target.startswith(a + ".") for a in allowed):
                faults.append(f"{path.relative_to(root)}:{line} imports {target}: the "
                              f"work belongs in harness/{home.replace('.', '/')}.py")
    return faults


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def outside_names(path: Path) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """What a module imports from outside harness/ (every import, wherever it stands,
    and `importlib.import_module` of a literal name), and the calls it makes by their
    full names (`sp.Popen` of `import subprocess as sp` is `subprocess.Popen`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    alias: dict[str, str] = {}
    imported = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                alias[(a.asname or a.name).split(".")[0]] = (a.name if a.asname
                                                              else a.name.split(".")[0])
                imported.append((a.name, node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.append((node.module, node.lineno))
            for a in node.names:
                alias[a.asname or a.name] = f"{node.module}.{a.name}"
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            head, _, rest = name.partition(".")
            full = ".".join(filter(None, (alias.get(head, head), rest)))
            calls.append((full, node.lineno))
            if full in ("importlib.import_module", "__import__") and node.args \
                    and isinstance(node.args[0], ast.Constant):
                imported.append((str(node.args[0].value), node.lineno))
    return imported, calls


def docker_importers(root: Path) -> list[str]:
    """Modules that import docker-py but are not docker's own (harness/runtimes/docker*.py)."""
    faults = []
    for module, path in modules(root).items():
        if module.startswith("harness.runtimes.docker"):
            continue
        for name, line in outside_names(path)[0]:
            if name == "docker" or name.startswith("docker."):
                faults.append(f"{path.relative_to(root)}:{line} imports {name}")
    return faults


def spawners(root: Path) -> list[str]:
    """Calls that start a process, outside harness/runtimes/process.py."""
    faults = []
    for module, path in modules(root).items():
        if module == SPAWNER or module in AGENT_SPAWNERS:
            continue
        for name, line in outside_names(path)[1]:
            if name.startswith(SPAWNING):
                faults.append(f"{path.relative_to(root)}:{line} calls {name}")
    return faults


def test_every_command_is_thin() -> None:
    assert len(commands(ROOT)) >= 10
    assert long_commands(ROOT) == []


def test_every_command_checks_the_shared_options_first() -> None:
    assert unchecked_commands(ROOT) == []
    text = said()
    assert "checked by `options.check`, which every command's `run` calls first" in text


def test_only_dockers_modules_import_docker() -> None:
    assert docker_importers(ROOT) == []
    text = said()
    assert "docker's modules (`runtimes/docker*.py`), the only ones that import `docker`" \
        in text


def test_one_module_spawns_processes() -> None:
    assert spawners(ROOT) == []
    assert (ROOT / (SPAWNER.replace(".", "/") + ".py")).is_file()
    text = said()
    assert "`process`, the only module that starts a process" in text
    assert "inside the cell, the agent's watchdog (`harness/agent/watchdog.py`)" in text
    assert "the fork server (`harness/agent/forkserver.py`)" in text
    assert "the second agent that times the steps as the user's interpreter runs them" \
        " (`harness/agent/asuser.py`)" in text


# -------------------------------------------------------- and these checks can fail
def test_a_long_or_unchecked_command_is_found(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(40))
    root = _tree(tmp_path, {
        "harness/__init__.py": "",
        "harness/cli/__init__.py": "",
        "harness/cli/good.py": ("def add_parser(sub):\n    sub.set_defaults(func=run)\n"
                                "def run(args):\n    '''Doc.'''\n    import os\n"
                                "    options.check(args)\n    return 0\n"),
        "harness/cli/long.py": ("def add_parser(sub):\n    sub.set_defaults(func=go)\n"
                                f"def go(args):\n    options.check(args)\n{body}\n"),
        "harness/cli/late.py": ("def add_parser(sub):\n    sub.set_defaults(func=run)\n"
                                "def run(args):\n    x = 1\n    options.check(args)\n"),
    })
    assert long_commands(root) == [
        "harness/cli/long.py:go is 42 lines (at most 40: move the work to a function)"]
    assert unchecked_commands(root) == [
        "harness/cli/late.py:run does not call options.check(args) first"]


def test_a_stray_docker_import_or_spawn_is_found(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "harness/__init__.py": "",
        "harness/runtimes/__init__.py": "",
        "harness/runtimes/dockerengine.py": "import docker\nimport subprocess\n",
        "harness/runtimes/process.py": "import subprocess\nsubprocess.run(['true'])\n",
        "harness/gpu/engine.py": "def f():\n    from docker.types import DeviceRequest\n",
        "harness/stages/a.py": ("import importlib\nimportlib.import_module('docker')\n"
                                "import subprocess as sp\nsp.Popen(['x'])\n"),
        "harness/stages/b.py": ("from subprocess import check_output\nimport os\n"
                                "check_output(['x'])\nos.execvp('x', ['x'])\n"),
        "harness/runtimes/local.py": "import subprocess\nx: subprocess.Popen[bytes]\n",
    })
    assert docker_importers(root) == ["harness/gpu/engine.py:2 imports docker.types",
                                      "harness/stages/a.py:2 imports docker"]
    assert spawners(root) == ["harness/stages/a.py:4 calls subprocess.Popen",
                              "harness/stages/b.py:3 calls subprocess.check_output",
                              "harness/stages/b.py:4 calls os.execvp"]


# ---------------------------------------------------------------- imports at the top
# Issue 64 item 4: imports stand at the top of their module; one made inside a function
# (an `import` statement, or importlib's with a literal harness name: the lazy packages'
# loaders) is one of at most LAZY_LIMIT, each with its reason in a `# lazy:` comment on
# its line or in the comment lines just above it.
LAZY_LIMIT = 40


def _is_lazy_import(node: ast.AST) -> bool:
    if isinstance(node, ast.Import | ast.ImportFrom):
        return True
    if not (isinstance(node, ast.Call) and node.args
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"):
        return False
    first = node.args[0]
    text = (first.value if isinstance(first, ast.Constant)
            else first.values[0].value if isinstance(first, ast.JoinedStr) and first.values
            and isinstance(first.values[0], ast.Constant) else None)
    return isinstance(text, str) and text.startswith("harness.")


def lazy_imports(root: Path) -> tuple[list[str], list[str]]:
    """Every import made inside a function of harness/ (the agent apart), as
    `path:line`, and those of them without a `# lazy:` reason."""
    found, unsaid = [], []
    for path in sorted((root / "harness").rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[1] == "agent":
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        tree = ast.parse("\n".join(lines), str(path))
        seen: set[int] = set()
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if id(node) in seen or not _is_lazy_import(node):
                    continue
                seen.add(id(node))
                line = node.lineno  # type: ignore[attr-defined]
                found.append(f"{rel}:{line}")
                above = line - 2
                said = [lines[line - 1]]
                while above >= 0 and lines[above].lstrip().startswith("#"):
                    said.append(lines[above])
                    above -= 1
                if not any("# lazy:" in text for text in said):
                    unsaid.append(f"{rel}:{line}")
    return found, unsaid


def test_imports_stand_at_the_top_but_a_few_each_with_its_reason() -> None:
    found, unsaid = lazy_imports(ROOT)
    assert not unsaid, f"an import inside a function without a `# lazy:` reason: {unsaid}"
    assert len(found) <= LAZY_LIMIT, (
        f"{len(found)} imports inside functions (at most {LAZY_LIMIT}); move them to the "
        f"top of their module: {found}")


def test_a_lazy_import_without_its_reason_is_found(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "harness/a.py": ("def f():\n    # lazy: NumPy on first use\n    import numpy\n"
                         "def g():\n    import json\n"
                         "def h():\n    importlib.import_module(f'harness.{x}')  # lazy: by name\n"
                         "def k():\n    importlib.import_module(name)\n"),
        "harness/agent/loop.py": "def f():\n    import os\n",
    })
    found, unsaid = lazy_imports(root)
    assert found == ["harness/a.py:3", "harness/a.py:5", "harness/a.py:7"]
    assert unsaid == ["harness/a.py:5"]


def test_an_answers_command_only_parses_calls_and_prints() -> None:
    assert commands_doing_work(ROOT) == []


def test_a_command_doing_the_work_is_found(tmp_path: Path) -> None:
    files = {"harness/__init__.py": "", "harness/cli/__init__.py": "",
             "harness/orchestrator.py": "", "harness/report/__init__.py": "",
             "harness/days/__init__.py": "", "harness/days/search.py": "",
             "harness/days/journey.py": ""}
    files.update({f"harness/cli/{c}.py": "" for c in ANSWER_COMMANDS})
    files["harness/cli/day.py"] = ("from harness.days.search import x\nfrom harness import "
                                   "report\nfrom harness.stages.orchestrator import Sweep\n"
                                   "def f():\n    from harness.days.journey import causes\n")
    assert [f.split(" ")[0] for f in commands_doing_work(_tree(tmp_path, files))] == [
        "harness/cli/day.py:3", "harness/cli/day.py:5"]


# Issue 88 item 4: a cell's way to its verdict is followed by reading imports, never
# through a name a package hands on when first asked (PEP 562's module `__getattr__`).
# The packages that still do are the entry points a user or a renderer names.
LAZY_PACKAGES = {"harness", "harness.api", "harness.cli", "harness.report"}
WAY_OF_A_CELL = ("stages", "analysis", "protocol", "result")


def lazy_packages(root: Path) -> set[str]:
    """The modules of harness/ that define a module-level `__getattr__`."""
    out = set()
    for module, path in modules(root).items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        if any(isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
               for node in _module_level(tree.body)):
            out.add(module)
    return out


def test_no_package_on_a_cells_way_hands_on_names_lazily() -> None:
    found = lazy_packages(ROOT)
    assert found <= LAZY_PACKAGES, sorted(found - LAZY_PACKAGES)
    assert not {m for m in found if m.split(".")[1:2] and m.split(".")[1] in WAY_OF_A_CELL}


def test_a_lazy_package_attribute_is_found(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "harness/__init__.py": "",
        "harness/analysis/__init__.py": ("if True:\n    def __getattr__(name):\n"
                                         "        return name\n"),
        "harness/analysis/rules.py": "def __getattr__(name):\n    return name\n",
        "harness/sweeping/__init__.py": "def get(name):\n    return name\n",
    })
    assert lazy_packages(root) == {"harness.analysis", "harness.analysis.rules"}
