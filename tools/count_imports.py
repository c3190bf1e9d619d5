"""Count imports inside functions in harness/ (outside harness/agent), by folder."""
import ast, sys
from collections import Counter
from pathlib import Path

root = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
c = Counter()
verbose = "-v" in sys.argv
for p in sorted((root / "harness").rglob("*.py")):
    rel = p.relative_to(root)
    if rel.parts[1] == "agent":
        continue
    tree = ast.parse(p.read_text())
    seen = set()
    for f in ast.walk(tree):
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for n in ast.walk(f):
                if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in seen:
                    seen.add(id(n))
                    folder = rel.parts[1] if len(rel.parts) > 2 else "(top)"
                    c[folder] += 1
                    if verbose:
                        print(f"{rel}:{n.lineno}: {ast.unparse(n)}")
print(sum(c.values()), dict(sorted(c.items())))
