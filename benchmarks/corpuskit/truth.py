"""Measure a corpus case's truth by hand, outside harness: for each release of the case,
a plain loop in the release's venv (`drivers.TRUTH_DRIVER`: heap and RSS after
gc.collect() around N calls, time per call). The venv is the one the corpus sweep uses
(built and cached by harness's local runtime from `Case.requirements`), so measuring
the truth also builds what the benchmark needs.

Run: PYTHONPATH=. python benchmarks/corpuskit/truth.py SLUG [SLUG...] [--calls 3000]
Prints per release one JSON line; copy the numbers into the case's CASE["truth"].
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from corpuskit import drivers  # noqa: E402
from corpuskit.cases import CORPUS, Case, load  # noqa: E402
from harness.errors import HarnessError  # noqa: E402
from harness.matrixfile.model import ImageSpec  # noqa: E402
from harness.runtimes.local import LocalRuntime  # noqa: E402


def venv_python(case: Case, release: str, tools: bool = True) -> Path:
    """The release's venv interpreter, built by harness's local runtime if not cached.

    Raises:
        harness.errors.ImageUnavailable: pip cannot install the requirements.
    """
    spec = ImageSpec(case.label(release), "python3", 0,
                     tuple(case.requirements(release, tools)))
    return Path(LocalRuntime().prepare(spec, lambda _: None).python or "python3")


def measure(case: Case, calls: int, cap_s: float, warmup: int,
            releases: list[str] | None = None) -> list[str]:
    """One JSON line per release: the case's, or `releases` (to find the first bad)."""
    lines = []
    pairs = [("?", r) for r in releases] if releases else case.releases()
    with tempfile.TemporaryDirectory(prefix="corpus-truth-") as tmp:
        for role, release in pairs:
            try:
                python = venv_python(case, release)
                got = drivers.truth(python, case.path, case.params, Path(tmp), calls,
                                    warmup, cap_s)
            except (RuntimeError, HarnessError) as exc:
                got = {"error": str(exc)[-600:]}
            lines.append(json.dumps({"case": case.slug, "role": role, "release": release,
                                     **{k: round(v, 2) if isinstance(v, float) else v
                                        for k, v in got.items()}}))
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("slugs", nargs="+")
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--cap", type=float, default=30.0, help="seconds per loop at most")
    p.add_argument("--warmup", type=int, default=200, help="calls before the measure")
    p.add_argument("--releases", default="",
                   help="comma-separated releases to measure instead of the case's")
    p.add_argument("--jobs", type=int, default=2, help="cases measured side by side")
    args = p.parse_args(argv)
    cases = [load(CORPUS / f"{s}.py", need_truth=False) for s in args.slugs]
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(measure, c, args.calls, args.cap, args.warmup,
                               [r for r in args.releases.split(",") if r]) for c in cases]
        for case, fut in zip(cases, futures, strict=True):
            try:
                print("\n".join(fut.result()), flush=True)
            except Exception as exc:
                print(json.dumps({"case": case.slug, "error": str(exc)[-800:]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
