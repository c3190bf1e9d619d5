"""The scenario file: one with top-level setup() and step() is imported as a module and
stepped; any other is run whole as a plain script. Stdlib only, Python 3.6+."""
import os
import sys


def has_protocol(path):
    """True when the file defines top-level setup() and step()."""
    import ast
    with open(path, "rb") as f:
        tree = ast.parse(f.read(), path)
    names = set(n.name for n in tree.body if isinstance(n, ast.FunctionDef))
    return "setup" in names and "step" in names


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
    """The params handed to setup(params): a dict that notes the keys the scenario
    reads (`params["batch"]`, `.get`, `in`, `.pop`, `.setdefault`; every key when it
    iterates, copies or unpacks them), for the end record's `params_read`: `harness
    fit` stops when the param it varies is one the scenario never reads."""

    def __init__(self, *args, **kwargs):
        dict.__init__(self, *args, **kwargs)
        self.read = set()

    def noted(self):
        # type: () -> list
        """The keys read so far, sorted (the param names are strings, from JSON)."""
        return sorted(k for k in self.read if isinstance(k, str))

    def _every(self):
        self.read.update(dict.keys(self))

    def __getitem__(self, key):
        self.read.add(key)
        return dict.__getitem__(self, key)

    def get(self, key, default=None):
        self.read.add(key)
        return dict.get(self, key, default)

    def __contains__(self, key):
        self.read.add(key)
        return dict.__contains__(self, key)

    def pop(self, key, *default):
        self.read.add(key)
        return dict.pop(self, key, *default)

    def setdefault(self, key, default=None):
        self.read.add(key)
        return dict.setdefault(self, key, default)

    # Iterating, copying or unpacking (`**params`, `dict(params)`) reads every key:
    # with keys() and __iter__ overridden, CPython goes through them for those too.
    def keys(self):
        self._every()
        return dict.keys(self)

    def items(self):
        self._every()
        return dict.items(self)

    def values(self):
        self._every()
        return dict.values(self)

    def __iter__(self):
        self._every()
        return dict.__iter__(self)

    def copy(self):
        self._every()
        return dict(dict.items(self))
