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
