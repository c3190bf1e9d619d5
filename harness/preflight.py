"""Checks before the first cell, on the host, of what needs no container per image:
`compile_scenarios` (host Python) makes a syntax error, setup() without step(), a setup/step
not a function of one argument, or a sys.exit() call an input error (exit 2, file:line), not
a crash on every image. `whole_script`: a plain script.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
from collections.abc import Iterable
from pathlib import Path

from harness.agent.scenariofile import PROTOCOL, protocol_problem, top_level_names
from harness.errors import InputError
from harness.matrixfile.model import Cell, RunSettings
from harness.result.runkey import parse_source
from harness.thresholds import AnalysisConfig


def decidable_iterations(settings: RunSettings, cfg: AnalysisConfig) -> int:
    """Measured iterations that give `cfg.min_samples` memory samples: enough to decide."""
    return cfg.min_samples * settings.sample_every


def floor_caps(cells: Iterable[Cell], cfg: AnalysisConfig, asked: int
               ) -> tuple[list[Cell], str | None]:
    """Raise an `--iterations N` cap over budgeted cells (and their `asked_calls`) to what
    a decision needs, else the run reads `ambiguous` and runs again anyway.

    Returns:
        The cells, and the sentence that says so (None where no cap was raised).
    """
    out: list[Cell] = []
    raised: dict[int, list[str]] = {}
    for cell in cells:
        s = cell.settings
        need = decidable_iterations(s, cfg)
        if s.run_budget is not None and s.max_iterations is not None and \
                s.max_iterations < need:
            raised.setdefault(need, []).append(cell.id)
            cell = cell.with_settings(dataclasses.replace(s, max_iterations=need,
                                                          asked_calls=need))
        out.append(cell)
    if not raised:
        return out, None
    parts = [f"{need} calls ({', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''})"
             for need, ids in sorted(raised.items())]
    return out, (f"--iterations {asked} is the cap of a run with a time budget, raised to "
                 f"what a decision needs ({cfg.min_samples} memory samples, one every "
                 f"sample_every calls): {'; '.join(parts)}")


def check_lengths(cells: Iterable[Cell], cfg: AnalysisConfig, refuse: bool) -> list[str]:
    """Warnings for cells too short to ever decide a memory trend (< `min_samples` calls);
    refused instead with `refuse` (the length came from `--iterations`), as a length the
    matrix sets is the author's smoke run.

    Raises: InputError: with `refuse`, the cells, the length and the length they need.
    """
    short: dict[tuple[int, int], list[Cell]] = {}
    for cell in cells:
        s = cell.settings
        if s.agent_iterations < cfg.min_samples:
            short.setdefault((s.agent_iterations, s.sample_every), []).append(cell)
    said: list[str] = []
    for (iterations, every), group in short.items():
        need = decidable_iterations(group[0].settings, cfg)
        ids = [c.id for c in group]
        head = (f"{iterations} measured iteration{'s' if iterations != 1 else ''} cannot "
                f"decide a trend ({', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''}): a "
                f"memory trend needs {cfg.min_samples} samples at distinct calls")
        if refuse:
            raise InputError(f"{head}\n  fix: --iterations {need} or more (at sample_every "
                             f"{every}: {cfg.min_samples} samples)")
        said.append(f"{head}; only how it ends (oom, crash, timeout) can be told: give it "
                    f"{need} iterations or more to decide a leak or slowdown")
    return said


def compile_scenarios(cells: Iterable[Cell]) -> None:
    """Compile each distinct scenario script once.

    Raises:
        InputError: the first file that does not read or compile, as file:line: message.
    """
    problems: list[str] = []
    seen: set[Path] = set()
    for cell in cells:
        script = cell.scenario.script
        if script in seen:
            continue
        seen.add(script)
        try:
            source = script.read_bytes()
        except OSError as exc:
            problems.append(f"{script}: cannot read the scenario: {exc.strerror}")
            continue
        try:
            compile(source, str(script), "exec", dont_inherit=True)
        except SyntaxError as exc:
            line = f":{exc.lineno}" if exc.lineno else ""
            text = (exc.text or "").rstrip()
            where = f"\n    {text.strip()}" if text else ""
            problems.append(f"{script}{line}: {type(exc).__name__}: {exc.msg}{where}")
        except ValueError as exc:  # NUL bytes
            problems.append(f"{script}: {exc}")
        else:
            problem = protocol_problem(parse_source(source, str(script)), script,
                                       call_problem)
            if problem is not None:
                problems.append(problem)
    if problems:
        raise InputError("\n".join(problems) + "\n  fix: correct the scenario; nothing ran")


# What the agent hands each protocol function: setup(params), step(state).
ARGUMENT = {"setup": "params", "step": "state"}
# A value no call can make a function of: `step = 5`, `setup = None`, `step = [f]`.
_NOT_CALLABLE = (ast.Constant, ast.JoinedStr, ast.List, ast.Tuple, ast.Dict, ast.Set,
                 ast.ListComp, ast.DictComp, ast.SetComp, ast.GeneratorExp, ast.BinOp,
                 ast.UnaryOp, ast.Compare, ast.BoolOp)


def _bound_last(tree: ast.Module, name: str) -> ast.AST | None:
    """The top-level statement (or value) that binds `name` last."""
    last: ast.AST | None = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == name:
                last = node
        elif isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                last = node.value
        elif isinstance(node, ast.Import | ast.ImportFrom) and any(
                (a.asname or a.name).split(".")[0] == name for a in node.names):
            last = node
    return last


def _takes_one(args: ast.arguments) -> bool:
    """Whether a function with these parameters takes exactly one positional argument."""
    positional = [*args.posonlyargs, *args.args]
    required = len(positional) - len(args.defaults)
    no_default = [d for d in args.kw_defaults if d is None]
    return required <= 1 and (bool(positional) or args.vararg is not None) and not no_default


def call_problem(tree: ast.Module, script: Path) -> str | None:
    """Why a protocol name cannot be called as `setup(params)` / `step(state)`, or None.
    Decorated functions and names bound by calls or imports are left to the agent."""
    for name in PROTOCOL:
        node = _bound_last(tree, name)
        arg = ARGUMENT[name]
        if isinstance(node, _NOT_CALLABLE):
            what = ast.unparse(node)
            what = what if len(what) <= 40 else what[:37] + "..."
            return (f"{script}:{node.lineno}: `{name} = {what}` is not a function; the "
                    f"agent calls {name}({arg}), so `{name}` must be a function of one "
                    "argument")
        if isinstance(node, ast.Lambda) and not _takes_one(node.args):
            given = ast.unparse(node.args)
            return (f"{script}:{node.lineno}: `{name} = lambda{' ' if given else ''}{given}: "
                    f"...` cannot be called as {name}({arg}): the agent passes one argument")
        if isinstance(node, ast.AsyncFunctionDef):
            return (f"{script}:{node.lineno}: `async def {name}` makes a coroutine the "
                    f"agent never awaits; define `def {name}({arg}):`")
        if (isinstance(node, ast.FunctionDef) and not node.decorator_list
                and not _takes_one(node.args)):
            given = ast.unparse(node.args)
            return (f"{script}:{node.lineno}: `def {name}({given})` cannot be called as "
                    f"{name}({arg}): the agent passes one argument; define "
                    f"`def {name}({arg}):`")
    return None


@functools.lru_cache(maxsize=256)
def whole_script(script: Path) -> bool:
    """A plain script (neither setup() nor step()): run whole, once."""
    try:
        tree = parse_source(script.read_bytes(), str(script))
    except (OSError, SyntaxError, ValueError):
        return False
    return not any(n in top_level_names(tree) for n in PROTOCOL)
