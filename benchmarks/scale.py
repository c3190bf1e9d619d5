"""Harness's own cost as a sweep grows: 72, 400, 1,600 and 10,000 cells over the fake
runtime.

Each size is a release-regression matrix (images named like NGC tags, 20.01 on, x GPUs x
scenarios; every scenario but the last leaks from one tag on, so each row has a first
bad) swept through the real orchestrator with `tests/fakeruntime.py` (no containers),
then read back by `harness report DIR` at COLUMNS=100. Each step runs in a child
process of its own, so its peak RSS is its own. Prints per size: cells, sweep seconds
and seconds per cell, the reports' writing (wall and CPU seconds), the sweep's peak RSS,
`harness report`'s seconds (wall and CPU) and peak RSS, report.html's size, and the
console's lines and widest line; and,
where Chromium is installed, how long report.html takes to open in it (headless: from
navigation to the load event and a first layout of the whole page; "-" without it).

With `--base REV` the same sizes run over that commit's tree too (`git archive`),
side by side: before and after in one run, on one machine (`--only base` measures that
tree alone, `--only this` this one: back to back where one run would take too long).

    python benchmarks/scale.py [--quick] [--sizes 72 400 1600 10000] [--base REV]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# size -> (images, GPUs, scenarios)
SHAPES = {12: (6, 1, 2), 72: (12, 2, 3), 400: (40, 2, 5), 1600: (40, 4, 10),
          10000: (100, 4, 25)}
SCENARIO = "def setup(params):\n    return None\n\n\ndef step(state):\n    pass\n"


def tags(n: int) -> list[str]:
    """NGC-like release tags: 20.01, 20.02, ... one a month."""
    return [f"{20 + k // 12}.{k % 12 + 1:02d}" for k in range(n)]


def wide_matrix(workdir: Path, name: str, images: int, gpus: int, scenarios: int
                ) -> tuple[Path, list[str]]:
    """A matrix of `images` release tags x `gpus` x `scenarios` (s00.py, s01.py, ...,
    each allocating nothing) in `workdir`, on the local runtime: its path and the tags."""
    names = tags(images)
    for k in range(scenarios):
        (workdir / f"s{k:02d}.py").write_text(SCENARIO)
    m = workdir / f"{name}.yaml"
    m.write_text(f"name: {name}\nruntime: local\n"
                 "defaults: {iterations: 300, warmup: 30, sample_every: 5, repeats: 0, "
                 "rounds: 0}\n"
                 f"matrix:\n  image: [{', '.join(f'{{name: {n!r}}}' for n in names)}]\n"
                 f"  gpu: [{', '.join(map(str, range(gpus)))}]\n"
                 f"  scenario: [{', '.join(f's{k:02d}.py' for k in range(scenarios))}]\n")
    return m, names


def child_sweep(workdir: Path, cells: int) -> None:
    """In the child: sweep the matrix over the fake runtime, write the reports, and
    print the seconds each took as JSON."""
    sys.path.insert(0, str(Path.cwd() / "tests"))
    from fakeruntime import Behaviour, FakeRuntime

    from harness import matrixfile
    from harness.report import Report, write_all
    from harness.result.codec import encode
    from harness.result.model import Plan, Planned
    from harness.stages.orchestrator import sweep
    from harness.store import RunStore
    from harness.store.results import PLAN_FILE

    images, gpus, scenarios = SHAPES[cells]
    m, names = wide_matrix(workdir, "scale", images, gpus, scenarios)
    first_bad = names[images * 2 // 3]
    matrix = matrixfile.load(m)
    assert len(matrix.cells) == cells, (len(matrix.cells), cells)
    clean = f"s{scenarios - 1:02d}"

    def behave(cell: object) -> Behaviour:
        label = cell.image.label  # type: ignore[attr-defined]
        script = str(cell.scenario.script)  # type: ignore[attr-defined]
        if label >= first_bad and clean not in script:
            return Behaviour(leak_per_iter=16384)
        return Behaviour()

    store = RunStore.open(workdir / "reports", matrix.name, False)
    planned = tuple(Planned(c.id, c.row, c.image.label, c.image.index) for c in matrix.cells)
    try:
        store.write(PLAN_FILE, encode(Plan(planned, str(m))))   # as `harness sweep` does
        t0 = time.monotonic()
        outcome = sweep(matrix, list(matrix.cells), FakeRuntime(behave), store,
                        lambda _: None, False)
        t1, c1 = time.monotonic(), time.process_time()
        report = Report.from_results(matrix.name, outcome.results, {}, store.root,
                                     outcome.series, planned)
        write_all(store, report)
        t2, c2 = time.monotonic(), time.process_time()
    finally:
        store.unlock()
    print(json.dumps({"sweep": t1 - t0, "write": t2 - t1, "write_cpu": c2 - c1,
                      "dir": str(store.root)}))


def peak(argv: list[str], tree: Path, env: dict[str, str] | None = None
         ) -> tuple[str, float, float, float]:
    """Run `argv` in `tree`; its stdout, wall seconds, peak RSS (MiB, from wait4) and CPU
    seconds (user and system: on a shared, loaded machine the steadier figure)."""
    full = {**os.environ, "PYTHONPATH": str(tree), **(env or {})}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, cwd=tree, env=full, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.monotonic() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text = out.read()
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n"
                             f"{err.read()[-2000:]}")
    return text, seconds, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


# Appended to a copy of the page: at the load event, lay the page out and write the time
# since navigation into the DOM, which --dump-dom prints.
PROBE = ('<script>addEventListener("load",function(){document.body.offsetHeight;'
         'var p=document.createElement("pre");p.id="harness-opened-ms";'
         'p.textContent=String(performance.now());document.body.appendChild(p);});</script>')


def page_open(page: Path) -> float:
    """Seconds from navigation to the page laid out after its load event, in headless
    Chromium; NaN without a Chromium on PATH (or when it says nothing)."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        return float("nan")
    probe = page.with_name(".open-probe.html")
    probe.write_text(page.read_text(encoding="utf-8") + PROBE, encoding="utf-8")
    try:
        shown = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu",
                                "--no-first-run", "--dump-dom", probe.as_uri()],
                               capture_output=True, text=True, timeout=120).stdout
    except subprocess.TimeoutExpired:
        return float("nan")
    finally:
        probe.unlink()
    found = re.search(r'id="harness-opened-ms">([0-9.]+)<', shown)
    return float(found[1]) / 1000 if found else float("nan")


def measure(tree: Path, cells: int, workdir: Path) -> dict[str, float]:
    workdir.mkdir(parents=True)
    out, _, sweep_rss, _ = peak([sys.executable, str(REPO / "benchmarks" / "scale.py"),
                              "--child", str(cells), str(workdir)], tree)
    facts = json.loads(out.strip().splitlines()[-1])
    root = Path(facts["dir"])
    shown, report_s, report_rss, report_cpu = peak(
        [sys.executable, "-m", "harness", "report", str(root)], tree,
        {"COLUMNS": "100", "NO_COLOR": "1"})
    lines = shown.splitlines()
    return {"cells": cells, "sweep": facts["sweep"], "per_cell": facts["sweep"] / cells,
            "write": facts["write"], "write_cpu": facts["write_cpu"],
            "sweep_rss": sweep_rss, "report": report_s, "report_cpu": report_cpu,
            "report_rss": report_rss,
            "page": (root / "report.html").stat().st_size / 2**20,
            "open": page_open(root / "report.html"),
            "lines": len(lines), "widest": max((len(x) for x in lines), default=0)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="12 cells only (seconds; for CI)")
    p.add_argument("--sizes", type=int, nargs="+", choices=sorted(SHAPES),
                   default=[72, 400, 1600])
    p.add_argument("--base", metavar="REV",
                   help="also measure this commit's tree, side by side (before/after)")
    p.add_argument("--only", choices=("base", "this"),
                   help="with --base: measure only that tree")
    p.add_argument("--child", nargs=2, metavar=("CELLS", "DIR"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        child_sweep(Path(a.child[1]), int(a.child[0]))
        return
    sizes = [12] if a.quick else a.sizes
    print(f"load: {os.getloadavg()[0]:.1f} (1-minute average, {os.cpu_count()} CPUs)")
    print(f"{'tree':<8} {'cells':>5} {'sweep s':>8} {'s/cell':>7} {'write s':>8} {'cpu':>5} "
          f"{'sweep MiB':>9} {'report s':>8} {'cpu':>5} {'rep MiB':>7} {'html MB':>7} "
          f"{'open s':>6} {'lines':>5} {'widest':>6}", flush=True)
    with tempfile.TemporaryDirectory() as d:
        trees = [("this", REPO)]
        if a.base:
            base = Path(d) / "base"
            base.mkdir()
            archive = subprocess.run(["git", "-C", str(REPO), "archive", a.base],
                                     check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
            trees.insert(0, ("base", base))
        trees = [(name, tree) for name, tree in trees if a.only in (None, name)]
        for cells in sizes:
            for name, tree in trees:
                m = measure(tree, cells, Path(d) / f"{name}-{cells}")
                print(f"{name:<8} {m['cells']:>5} {m['sweep']:>8.1f} {m['per_cell']:>7.4f} "
                      f"{m['write']:>8.1f} {m['write_cpu']:>5.1f} {m['sweep_rss']:>9.0f} "
                      f"{m['report']:>8.1f} {m['report_cpu']:>5.1f} "
                      f"{m['report_rss']:>7.0f} {m['page']:>7.2f} {m['open']:>6.2f} "
                      f"{m['lines']:>5} {m['widest']:>6}  (load "
                      f"{os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
