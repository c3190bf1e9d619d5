"""Reading result.json: the hand-made checking decoder against msgspec, side by side.

The files: a release-regression matrix (40 NGC-like tags x 4 GPUs x 10 scenarios, 1,600
cells; `--quick` 6 x 2 x 3, 36) swept through the real orchestrator over the fake
runtime (`tests/fakeruntime.py`, no containers), its scenarios behaving each their own
way from a first bad tag on (a leak, a slowdown, a crash, an OOM, a time-out, a raised
error, a busy host, a GPU clock, a cgroup reading; one stays clean), each cell's
result.json as the sweep wrote it. The 1,600 files are then laid out as three runs of
that matrix (3 x 1,600 = 4,800 files, what `harness history` reads over three weekly
runs), each with its plan.json. Beside them, the 30 result.json files recorded on a real
H100 (`tests/data/h100`, schemas 2 and 3, host samples and all), read 10 times over
(`--quick`: once).

Each way of reading runs in a child process of its own, the ways in turn (A B C A B C),
every file's bytes read before the clock starts:

- `hand`: `json.loads`, then the hand-made checking decoder
  (`harness.result.codec.decode_checked`), the codec as it was before msgspec;
- `msgspec`: `msgspec.json.decode(bytes, type=CellResult)` alone, which keeps none of
  the codec's promises for older or bad files (it rejects them; counted, not read);
- `codec`: the harness's reading now (`store.results.load_json`, then `load_result`):
  `codec.parse` (msgspec's parser, Python's where it refuses the text), then msgspec
  first and the checking decoder for what msgspec rejects (counted).

Prints per corpus and way: the median seconds over the rounds, ms per file, the ratio
to `hand`, the child's peak RSS (wait4) and the decoding's peak of traced Python memory
(tracemalloc, a second pass off the clock), and whether the results are the same as
`hand`'s (the repr of every result, NaN included). Then `store.results.read_cells` over
the three runs (files read from the page cache), with Python's cycle collector paused
as it reads now and left on, in turns. With `--base REV [REV ...]` it
also times `harness history` over the three runs with those commits' trees and with
this one, in turns (the same child-per-run way): medians, and each against the first.

    python benchmarks/codec_speed.py [--quick] [--rounds N] [--base REV [REV ...]]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scale import wide_matrix  # the same matrix shape as the scale benchmark

REPO = Path(__file__).resolve().parents[1]
SHAPE = {False: (40, 4, 10), True: (6, 2, 3)}      # quick -> (images, GPUs, scenarios)
RUNS = 3
RECORDED_TIMES = 10     # --quick: 1
WAYS = ("hand", "msgspec", "codec")


def behaviour(k: int, bad: bool) -> dict[str, object]:
    """Scenario `k`'s fake behaviour for an image before (`bad` False) or from the first
    bad tag on: each scenario fails its own way; the last stays clean."""
    if not bad:
        return {}
    return [{"leak_per_iter": 16384}, {"slowdown_per_iter": 2e-6}, {"exit_code": 1},
            {"oom": True}, {"timed_out": True}, {"error": "CUDA error: out of memory"},
            {"rq_share": 0.5, "slowdown_per_iter": 2e-6}, {"sm_mhz": 1410},
            {"cgroup_bytes": 3e8, "leak_per_iter": 4096}, {}][k % 10]


def child_sweep(workdir: Path, quick: bool) -> None:
    """In the child: sweep the matrix over the fake runtime; print its directory."""
    sys.path.insert(0, str(REPO / "tests"))
    from fakeruntime import Behaviour, FakeRuntime

    from harness import matrixfile
    from harness.result.model import Planned
    from harness.stages.orchestrator import sweep
    from harness.store import RunStore

    images, gpus, scenarios = SHAPE[quick]
    m, names = wide_matrix(workdir, "codec", images, gpus, scenarios)
    first_bad = names[images * 2 // 3]
    matrix = matrixfile.load(m)

    def behave(cell: object) -> Behaviour:
        label = cell.image.label  # type: ignore[attr-defined]
        k = int(Path(str(cell.scenario.script)).stem[1:])  # type: ignore[attr-defined]
        return Behaviour(**behaviour(k, label >= first_bad))  # type: ignore[arg-type]

    store = RunStore.open(workdir / "swept", matrix.name, False)
    planned = tuple(Planned(c.id, c.row, c.image.label, c.image.index) for c in matrix.cells)
    try:
        store.mark("sweep", matrix.name, str(m), planned)
        sweep(matrix, list(matrix.cells), FakeRuntime(behave), store, lambda _: None, False)
    finally:
        store.unlock()
    print(store.root)


def lay_out(swept: Path, base: Path) -> Path:
    """The swept run copied as RUNS runs of the matrix under `base`/codec, a day apart;
    their parent (what `harness history` is given)."""
    plan = json.loads((swept / "plan.json").read_text())
    root = base / "codec"
    for n in range(RUNS):
        run = root / f"20261101-00000{n}"
        for src in sorted(swept.glob("cells/*/result.json")):
            dst = run / "cells" / src.parent.name / "result.json"
            dst.parent.mkdir(parents=True)
            shutil.copyfile(src, dst)
        (run / "plan.json").write_text(json.dumps({**plan, "started": plan["started"]
                                                   + n * 86400}, indent=1, sort_keys=True))
    return root


def child_read(way: str, listing: Path) -> None:
    """In the child: read every file listed, by `way`; print the figures as JSON."""
    import tracemalloc

    from harness.result import codec
    from harness.result.codec import parse
    from harness.result.model import READS, REQUIRED, SCHEMA, CellResult, load_result

    blobs = [Path(p).read_bytes() for p in listing.read_text().split("\n") if p]
    asked = 0
    hand = codec.decode_checked

    def counted(*args: object, **kwargs: object) -> object:
        nonlocal asked
        asked += 1
        return hand(*args, **kwargs)   # type: ignore[arg-type]
    codec.decode_checked = counted  # type: ignore[assignment]

    def by_hand(blob: bytes) -> object:
        data = json.loads(blob)
        assert isinstance(data, dict) and data.get("schema", 1) in READS
        return hand(CellResult, {**data, "schema": SCHEMA}, required=REQUIRED)

    def by_msgspec(blob: bytes) -> object:
        import msgspec
        try:
            return msgspec.json.decode(blob, type=CellResult)
        except msgspec.ValidationError:
            return None

    read = {"hand": by_hand, "msgspec": by_msgspec,
            "codec": lambda blob: load_result(parse(blob))}[way]
    if way == "msgspec":
        import msgspec  # noqa: F401  (imported before the clock, as the others are)
    t0 = time.perf_counter()
    results = [read(b) for b in blobs]
    seconds = time.perf_counter() - t0
    rejected = sum(r is None for r in results)
    digest = hashlib.sha256("\n".join(map(repr, results)).encode()).hexdigest()
    del results
    calls = asked
    tracemalloc.start()
    kept = [read(b) for b in blobs]
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(json.dumps({"seconds": seconds, "traced": traced, "digest": digest,
                      "rejected": rejected, "checked": calls, "files": len(kept)}))


def timed(argv: list[str], tree: Path) -> tuple[str, float, float]:
    """Run `argv` in `tree`; its stdout, wall seconds and peak RSS (MiB, from wait4)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "COLUMNS": "100", "NO_COLOR": "1"}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, cwd=tree, env=env, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.monotonic() - t0
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text = out.read()
        if code not in (0, 1, 4):
            raise SystemExit(f"{' '.join(argv)} failed ({code}):\n{err.read()[-2000:]}")
    return text, seconds, usage.ru_maxrss / 1024      # KiB on Linux


def child_dirs(way: str, root: Path) -> None:
    """In the child: `store.results.read_cells` over every run under `root`, with the
    cycle collector paused as it does (`paused`) or left on (`on`); print the seconds."""
    import contextlib

    from harness.store import results

    if way == "on":
        results._collector_paused = contextlib.nullcontext  # type: ignore[assignment]
    runs = sorted(p for p in root.iterdir() if p.is_dir())
    for run in runs:        # the files' bytes in the page cache, as for the other ways
        for path in run.glob("cells/*/result.json"):
            path.read_bytes()
    t0 = time.perf_counter()
    kept = [results.read_cells(run) for run in runs]
    seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "cells": sum(len(c.results) for c in kept)}))


def directories(root: Path, rounds: int) -> None:
    seen: dict[str, list[float]] = {"on": [], "paused": []}
    for _ in range(rounds):
        for way in seen:
            out, _, _ = timed([sys.executable, __file__, "--dirs", way, str(root)], REPO)
            seen[way].append(float(json.loads(out.strip().splitlines()[-1])["seconds"]))
    on, paused = (statistics.median(seen[w]) for w in ("on", "paused"))
    print(f"read_cells over the {RUNS} runs, median of {rounds}: collector on {on:.2f} s, "
          f"paused (as it reads now) {paused:.2f} s: {on / paused:.2f}x", flush=True)


def compare(corpus: str, files: list[Path], rounds: int, workdir: Path) -> None:
    listing = workdir / f"{corpus}.txt"
    listing.write_text("\n".join(map(str, files)))
    runs: dict[str, list[dict[str, float | str]]] = {w: [] for w in WAYS}
    for _ in range(rounds):
        for way in WAYS:
            out, _, rss = timed([sys.executable, __file__, "--read", way, str(listing)], REPO)
            runs[way].append({**json.loads(out.strip().splitlines()[-1]), "rss": rss})
    hand = statistics.median(float(r["seconds"]) for r in runs["hand"])
    for way in WAYS:
        rs = runs[way]
        s = statistics.median(float(r["seconds"]) for r in rs)
        rss = statistics.median(float(r["rss"]) for r in rs)
        traced = statistics.median(float(r["traced"]) for r in rs) / 2**20
        last = rs[-1]
        checked = "-" if way == "hand" else str(last["checked"])
        same = "yes" if last["digest"] == runs["hand"][-1]["digest"] else (
            f"no ({last['rejected']} rejected)" if last["rejected"] else "NO")
        print(f"{corpus:<9} {len(files):>5} {way:<8} {s:>8.3f} {1e3 * s / len(files):>8.3f} "
              f"{hand / s:>7.2f}x {rss:>8.0f} {traced:>10.1f} {checked:>8} {same:>6}",
              flush=True)


def history(revs: list[str], root: Path, rounds: int, workdir: Path) -> None:
    """`harness history` over the runs with each commit's tree of `revs` and this one, in
    turns."""
    trees: list[tuple[str, Path]] = []
    for rev in revs:
        tree = workdir / f"tree-{rev}"
        tree.mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        trees.append((rev, tree))
    trees.append(("this tree", REPO))
    seen: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in trees}
    for _ in range(rounds):
        for name, tree in trees:
            _, s, rss = timed([sys.executable, "-m", "harness", "history", str(root)], tree)
            seen[name].append((s, rss))
    cells = len(list(root.glob("*/cells/*"))) // RUNS
    print(f"harness history, {RUNS} runs x {cells} cells, median of {rounds}:", flush=True)
    first = statistics.median(s for s, _ in seen[trees[0][0]])
    for name, v in seen.items():
        s = statistics.median(x for x, _ in v)
        rss = statistics.median(r for _, r in v)
        print(f"  {name:<12} {s:>6.2f} s {rss:>5.0f} MiB {first / s:>6.2f}x", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="36 cells x 3 runs, the recorded files once, 1 round (for CI)")
    p.add_argument("--rounds", type=int, help="rounds of A B C (default 5; --quick 1)")
    p.add_argument("--base", metavar="REV", nargs="+",
                   help="also time `harness history` with these commits' trees and this one")
    p.add_argument("--keep", metavar="DIR", type=Path,
                   help="make the files in DIR (new) and leave them there")
    p.add_argument("--sweep", metavar="DIR", help=argparse.SUPPRESS)
    p.add_argument("--read", nargs=2, metavar=("WAY", "LIST"), help=argparse.SUPPRESS)
    p.add_argument("--dirs", nargs=2, metavar=("WAY", "ROOT"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.sweep:
        child_sweep(Path(a.sweep), a.quick)
        return
    if a.read:
        child_read(a.read[0], Path(a.read[1]))
        return
    if a.dirs:
        child_dirs(a.dirs[0], Path(a.dirs[1]))
        return
    rounds = a.rounds or (1 if a.quick else 5)
    times = 1 if a.quick else RECORDED_TIMES
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        if a.keep:
            a.keep.mkdir(parents=True)
            work = a.keep.resolve()
        out, swept_s, _ = timed([sys.executable, __file__, "--sweep", str(work)]
                                + (["--quick"] if a.quick else []), REPO)
        root = lay_out(Path(out.strip().splitlines()[-1]), work / "reports")
        files = sorted(root.glob("*/cells/*/result.json"))
        recorded = sorted((REPO / "tests" / "data" / "h100").rglob("result.json"))
        print(f"{len(files) // RUNS} cells swept over the fake runtime in {swept_s:.1f} s, "
              f"laid out as {RUNS} runs; {len(recorded)} recorded H100 results x "
              f"{times}; {rounds} rounds, medians", flush=True)
        print(f"{'corpus':<9} {'files':>5} {'way':<8} {'median s':>8} {'ms/file':>8} "
              f"{'vs hand':>8} {'RSS MiB':>8} {'traced MiB':>10} {'checked':>8} {'same':>6}")
        compare("swept", files, rounds, work)
        compare("recorded", recorded * times, rounds, work)
        directories(root, rounds)
        if a.base:
            history(a.base, root, rounds, work)


if __name__ == "__main__":
    main()
