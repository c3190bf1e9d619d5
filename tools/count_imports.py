"""Count imports inside functions in harness/ (outside harness/agent), by folder.

An `import` statement counts, and so does `importlib.import_module` with a literal
harness name (the lazy packages' loaders): tests/unit/test_architecture.py holds them
at most 40, each with its `# lazy:` reason. `-v` lists them.
"""
import sys
from collections import Counter
from pathlib import Path

root = Path(next((a for a in sys.argv[1:] if a != "-v"), ".")).resolve()
sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "tests" / "unit")]
from test_architecture import lazy_imports  # noqa: E402

found, unsaid = lazy_imports(root)
c = Counter(Path(f.split(":")[0]).parts[1] if len(Path(f.split(":")[0]).parts) > 2
            else "(top)" for f in found)
if "-v" in sys.argv:
    print("\n".join(found))
print(len(found), dict(sorted(c.items())), f"without a reason: {unsaid}" if unsaid else "")
