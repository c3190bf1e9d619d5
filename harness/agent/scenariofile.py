"""The scenario file: one with top-level setup() and step() is imported as a module and
stepped; any other is run whole as a plain script. Stdlib only, Python 3.6+."""
import os
import sys

MYPY = False
if MYPY:    # the host's type check only: preflight runs `protocol_problem` too
    from typing import Any, Callable, Optional, Set


PROTOCOL = ("setup", "step")
# os._exit is left out: a forked child leaves with it; a step dying by it is a crash.
EXITS = ("sys.exit", "exit", "quit")


def top_level_names(tree):
    # type: (Any) -> Set[str]
    """The names a module's top level defines: functions, classes, assignments and
    imports (`step = make_step()` and `from common import step` count)."""
    import ast
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
    return names


def protocol_problem(tree, path, then=None):
    # type: (Any, Any, Optional[Callable[[Any, Any], Optional[str]]]) -> Optional[str]
    """What is wrong with the file as a scenario, or None: one of setup()/step() without
    the other, or one ending the process (sys.exit, os._exit); then `then`'s problem. The
    host runs it before any image is built (harness/preflight.py)."""
    import ast
    names = top_level_names(tree)
    have = [n for n in PROTOCOL if n in names]
    if len(have) == 1:
        import difflib
        missing = [n for n in PROTOCOL if n not in names][0]
        near = difflib.get_close_matches(missing, sorted(names - set(PROTOCOL)), n=1,
                                         cutoff=0.6)
        hint = " (is `%s` meant to be `%s`?)" % (near[0], missing) if near else ""
        return ("%s: defines %s() but no %s()%s; a scenario defines both setup(params) "
                "and step(state) at its top level, or neither to run whole as a script"
                % (path, have[0], missing, hint))
    if not have:
        return None
    problem = then(tree, path) if then is not None else None
    if problem is not None:
        return problem
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in PROTOCOL:
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and _called(call.func) in EXITS:
                    return ("%s:%d: %s() calls %s(), which ends the run; a %s returns "
                            "(raise an exception to fail it)"
                            % (path, call.lineno, node.name, _called(call.func), node.name))
    return None


def _called(func):
    import ast
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return func.value.id + "." + func.attr
    return ""


def has_protocol(path):
    """True when the file defines top-level setup() and step(); False when neither (a
    plain script, run whole).

    Raises:
        ScenarioMistake: one without the other, or a step that exits the process.
    """
    import ast
    with open(path, "rb") as f:
        tree = ast.parse(f.read(), path)
    problem = protocol_problem(tree, path)
    if problem is not None:
        raise ScenarioMistake(problem)
    names = top_level_names(tree)
    return "setup" in names and "step" in names


class ScenarioMistake(Exception):
    """The scenario file cannot run as written: the scenario's fault, never a finding
    about the image (the end record says `fault: scenario`)."""


# What the agent hands each function it calls (teardown's failure is only noted, so it is
# not checked).
CALLS = (("setup", "params", True), ("step", "state", True), ("info", "state", False))


def call_problem(module, path):
    """Why one of the module's protocol names cannot be called as the agent calls it
    (`step = 5`, `def step():`), or None. Checked before setup(), so the run fails at once
    and names it."""
    for name, arg, required in CALLS:
        fn = getattr(module, name, None)
        if fn is None and not required:
            continue
        if not callable(fn):
            return ("%s: `%s` is %s, not a function; the agent calls %s(%s)"
                    % (path, name, _what(fn), name, arg))
        if takes_one(fn):
            continue
        import inspect      # the slow way, for what it says: most scenarios never get here
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):     # some builtins have none: call and see
            continue
        try:
            signature.bind(None)
        except TypeError as exc:
            return ("%s: `%s%s` cannot be called as %s(%s): %s"
                    % (path, name, signature, name, arg, exc))
    return None


def takes_one(fn):
    """True when `fn` is a plain Python function one positional argument binds, read from
    its code object; False for anything else (then inspect decides)."""
    code = getattr(fn, "__code__", None)
    if type(fn).__name__ != "function" or code is None or getattr(
            fn, "__signature__", None) is not None or hasattr(fn, "__wrapped__"):
        return False
    positional = code.co_argcount
    required = positional - len(fn.__defaults__ or ())
    kw_required = [n for n in code.co_varnames[positional:positional + code.co_kwonlyargcount]
                   if n not in (fn.__kwdefaults__ or {})]
    return required <= 1 and not kw_required and (positional >= 1 or bool(code.co_flags & 4))


def _what(value):
    text = repr(value)
    text = text if len(text) <= 40 else text[:37] + "..."
    kind = type(value).__name__
    return "%s (%s %s)" % (text, "an" if kind[:1] in "aeiou" else "a", kind)


def called_wrongly(exc, tb):
    """The protocol name a TypeError came from when the call itself raised it (the
    agent's frame is innermost: the scenario's code never ran), else None."""
    if not isinstance(exc, TypeError) or tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    here = os.path.dirname(os.path.abspath(__file__))
    if os.path.dirname(os.path.abspath(code.co_filename)) != here:
        return None
    return {"steps": "step", "timed": tb.tb_frame.f_locals.get("phase")}.get(code.co_name)


def load_scenario(path):
    """Import the scenario file as a module named after it."""
    import importlib.util
    name = "harness_scenario_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError("cannot import scenario %s" % path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec.loader.exec_module(module)
    return module


def run_script(args):
    """A plain script: run it whole under the timer sampler."""
    import runpy
    sys.argv = [args.scenario]
    runpy.run_path(args.scenario, run_name="__main__")


class Params(dict):
    """The params handed to setup(params): a dict that notes the keys the scenario reads
    (every key when it iterates, copies or unpacks them), for the end record's
    `params_read`: `harness fit` stops when the param it varies is never read."""

    def __init__(self, *args, **kwargs):
        dict.__init__(self, *args, **kwargs)
        self.read = set()

    def noted(self):
        # type: () -> list
        """The keys read so far, sorted (the param names are strings, from JSON)."""
        return sorted(k for k in self.read if isinstance(k, str))


def _noting_key(name):
    """dict's method `name`, noting the key it is given as read."""
    method = getattr(dict, name)

    def noting(self, key, *rest):
        self.read.add(key)
        return method(self, key, *rest)
    noting.__name__ = name
    return noting


def _noting_every(name):
    """dict's method `name`, noting every key as read."""
    method = getattr(dict, name)

    def noting(self):
        self.read.update(dict.keys(self))
        return method(self)
    noting.__name__ = name
    return noting


for _name in ("__getitem__", "get", "__contains__", "pop", "setdefault"):
    setattr(Params, _name, _noting_key(_name))
# Iterating, copying or unpacking reads every key: CPython goes through the overridden
# keys() and __iter__ for those too.
for _name in ("keys", "items", "values", "__iter__", "copy"):
    setattr(Params, _name, _noting_every(_name))
