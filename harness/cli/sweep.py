"""`harness sweep matrix.yaml`: run every cell, decide verdicts, name the first bad."""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from harness import spec
from harness.errors import EXIT_OK, EXIT_REGRESSION
from harness.orchestrator import prefetch_analysis, sweep
from harness.report import ConsoleReporter, Report, write_all
from harness.runtimes import get_runtime
from harness.runtimes.base import Runtime
from harness.spec.model import Cell
from harness.store import RunStore


def add_parser(sub: Any) -> None:
    p = sub.add_parser("sweep", help="run a matrix of images x GPUs x scenarios")
    p.add_argument("matrix", type=Path, help="matrix YAML file")
    p.add_argument("-k", dest="select", metavar="EXPR",
                   help="only cells whose id matches EXPR (substrings, and/or/not)")
    p.add_argument("--resume", nargs="?", const=True, default=False, metavar="DIR",
                   help="continue the newest (or the given) results directory")
    p.add_argument("--out", type=Path, default=Path("reports"),
                   help="results base directory (default: reports/)")
    p.add_argument("--runtime", choices=("docker", "local"), help="override `runtime:`")
    p.add_argument("--docker-host", help="Docker endpoint (unix://, tcp://, ssh://user@host)")
    p.add_argument("--iterations", type=int, help="override iterations for every cell")
    p.add_argument("--warmup", type=int, help="override warm-up iterations for every cell")
    p.add_argument("--list", action="store_true", help="print the cell ids and exit")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=run)


def _override(cells: list[Cell], args: argparse.Namespace) -> list[Cell]:
    changes = {k: v for k, v in (("iterations", args.iterations), ("warmup", args.warmup))
               if v is not None}
    if not changes:
        return cells
    out = []
    for c in cells:
        settings = dataclasses.replace(c.settings, **changes)
        out.append(dataclasses.replace(c, scenario=dataclasses.replace(c.scenario,
                                                                       settings=settings)))
    return out


def run(args: argparse.Namespace) -> int:
    from harness.errors import InputError

    for flag in ("iterations", "warmup"):
        value = getattr(args, flag)
        if value is not None and value < (1 if flag == "iterations" else 0):
            raise InputError(f"--{flag} must be {'>= 1' if flag == 'iterations' else '>= 0'}")
    matrix = spec.load(args.matrix)
    cells = _override(spec.select(matrix.cells, args.select), args)
    if args.list:
        for c in cells:
            print(c.id)
        return EXIT_OK
    runtime = get_runtime(args.runtime or matrix.runtime, args.docker_host)
    runtimes: dict[str, Runtime] | None = None
    if len(matrix.hosts) > 1 or matrix.hosts[0].url is not None:
        runtimes = {h.label: get_runtime("docker", h.url) for h in matrix.hosts}
    resume: bool | Path = Path(args.resume) if isinstance(args.resume, str) else args.resume
    started = time.time()

    def progress(text: str) -> None:
        if not args.quiet:
            print(f"harness: {text}", file=sys.stderr, flush=True)

    # SIGTERM gets the same orderly path as Ctrl-C: kill the running cell, keep the rest.
    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    for label, rt in (runtimes or {"": runtime}).items():
        rt.cleanup()  # no engine / no GPU: exit 3 before any results directory exists
        rt.check([c for c in cells if not label or c.host.label == label])
    old = signal.signal(signal.SIGTERM, on_term)
    # A shell starts background jobs with SIGINT ignored and Python then keeps it
    # ignored; a sweep must still stop cleanly on Ctrl-C / kill -INT.
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    store = RunStore.open(args.out, matrix.name, resume)
    # Imports SciPy while the first cell starts; after every other import of this
    # command, so the two threads never import the same modules at once.
    prefetch_analysis()
    try:
        store.write("matrix.yaml", args.matrix.read_text(encoding="utf-8"))
        progress(f"{len(cells)} cells, runtime {runtime.name}, results in {store.root}")
        outcome = sweep(matrix, cells, runtime, store, progress, bool(resume), runtimes)
        report = Report.from_results(matrix.name, outcome.results, {
            "matrix": str(args.matrix), "runtime": runtime.name, "started": started,
            "seconds": round(outcome.seconds, 3), "ran": outcome.ran, "reused": outcome.reused,
            "baseline": matrix.baseline})
        paths = write_all(store, report)
    finally:
        try:
            for rt in (runtimes or {"": runtime}).values():
                rt.cleanup()
        finally:
            store.unlock()
            signal.signal(signal.SIGTERM, old)
            signal.signal(signal.SIGINT, old_int)
    ConsoleReporter.from_results(report).render(sys.stdout)
    print(f"\nresults: {store.root} ({', '.join(p.name for p in paths)})")
    return EXIT_REGRESSION if report.bad_cells else EXIT_OK
