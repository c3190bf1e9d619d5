"""A Python file loaded as a module from its path, as the agent loads its own files and a
scenario: the tests read the agent's modules and the scenarios this way, not through the
harness package."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_file(path: Path, name: str, *, folder_on_path: bool = False) -> ModuleType:
    """`path` executed as module `name`; with `folder_on_path`, its folder is on sys.path
    while it runs (its own `import _params` or `import protocol`, as the agent arranges)."""
    if folder_on_path:
        sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        if folder_on_path:
            sys.path.remove(str(path.parent))
