"""The local runtime's venv builds with uv beside pip, side by side in one run.

Each round builds the same requirement sets through `LocalRuntime.prepare` (the code a
sweep runs) twice, once with uv and once with pip (`HARNESS_VENV_TOOL`), each into an
empty venv cache, then prepares them again from the cache; the order of the two tools
alternates by round, so a busy machine slows both alike. Printed: seconds per tool,
fresh and cached, and the ratio pip / uv.

Full mode: the README demo's four multidict pins (examples/multidict.yaml), from the
package index (pip's and uv's download caches as they are). --quick: a wheel made here,
installed with no index, in one venv (what is measured is the venv and the installer,
not the network); CI's smoke run. No goal is checked: the ratio is printed for the docs.

Run: python benchmarks/venv_build.py [--rounds N] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.matrixfile.model import ImageSpec
from harness.runtimes.local import LocalRuntime
from harness.runtimes.resolver import TOOL_ENV, uv_bin

DEMO = ("multidict==6.4.4", "multidict==6.5.1", "multidict==6.6.3", "multidict==6.6.4")


def wheel(where: Path, name: str) -> Path:
    """A wheel of one empty module: installable with no index."""
    path = where / f"{name}-1.0-py3-none-any.whl"
    files = {f"{name}.py": "",
             f"{name}-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\n"
                                               "Version: 1.0\n",
             f"{name}-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: bench\n"
                                            "Root-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{name}-1.0.dist-info/RECORD"] = "".join(f"{n},,\n" for n in files) + (
        f"{name}-1.0.dist-info/RECORD,,\n")
    with zipfile.ZipFile(path, "w") as z:
        for file, text in files.items():
            z.writestr(file, text)
    return path


def prepare_all(tool: str, reqs: list[str], cache: Path) -> float:
    """Seconds to prepare one venv per requirement with `tool`, into `cache`."""
    os.environ[TOOL_ENV] = tool
    runtime = LocalRuntime(cache)
    start = time.monotonic()
    for i, req in enumerate(reqs):
        runtime.prepare(ImageSpec(label=f"v{i}", ref="python3", index=i, pip=(req,),
                                  python=sys.executable), lambda s: None)
    return time.monotonic() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="one local wheel, one round")
    args = ap.parse_args()
    if uv_bin() is None:
        print("venv_build: uv is not installed (pip install uv); nothing to compare")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        reqs = [str(wheel(root, "benchone"))] if args.quick else list(DEMO)
        rounds = 1 if args.quick else args.rounds
        took: dict[tuple[str, str], list[float]] = {}
        for r in range(rounds):
            for tool in (("uv", "pip") if r % 2 == 0 else ("pip", "uv")):
                cache = root / f"cache-{tool}-{r}"
                took.setdefault((tool, "fresh"), []).append(prepare_all(tool, reqs, cache))
                took.setdefault((tool, "cached"), []).append(prepare_all(tool, reqs, cache))
    print(f"{len(reqs)} venvs ({'local wheels' if args.quick else ' '.join(DEMO)}), "
          f"{rounds} round(s), median seconds:")
    print(f"{'':8}{'uv':>10}{'pip':>10}{'pip/uv':>9}")
    for when in ("fresh", "cached"):
        uv, pip = (statistics.median(took[(t, when)]) for t in ("uv", "pip"))
        print(f"{when:8}{uv:10.2f}{pip:10.2f}{pip / uv:8.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
