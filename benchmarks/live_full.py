"""Live and full agree (issue 61 point 6): on recorded full-budget runs, the live look
replayed gives the full run's verdict, and saves seconds.

A full run is one the live look did not stop: the agent ran its whole budget (or its
fixed length). Each is decided by the table on all its samples
(`analysis.decision.within_run`, one attempt), and the live look, as a sweep builds it
(`analysis.sequential.LiveDecider`, `min_iterations` 50), is fed its records in file
order. Where the look stops the run, the run as it would have stopped there (its
records up to that look; the end record the agent writes on a stop: stopped early, the
calls made, no collection after the last call) is decided the same way. They agree
where both verdicts are the same, or both good (`ok` and `plateau`: growth that came
and went after the stop). A run of fixed length is replayed as if its length were its
budget.

The runs, read from the repository:

- tests/data/live-full/late-onset/: benchmarks/late_onset.py's cases, 5 s budget
  (`late_onset.py --record DIR`);
- tests/data/live-full/corpus/: six releases of benchmarks/corpus/'s cases, each run
  for the 5 s budget with the live look off (`--record-corpus [CASE ...] --into DIR`:
  `harness sweep` of the matrix benchmarks/corpus.py writes, `min_iterations` at the
  cap, no re-run); the whole corpus so recorded is a few megabytes, read with
  `--runs DIR`;
- tests/data/recorded/ and tests/data/h100/'s cells that ended their run (fixed-length
  runs, budgets spent), not those a live look stopped when recorded.

Per run it prints the full verdict, the live one, the measured call the look decided
at, whether they agree and the seconds the look saves; then the totals.

Run: PYTHONPATH=. python benchmarks/live_full.py [--quick] [--runs DIR]
     [--record-corpus [CASE ...] --into DIR]
     (--quick, CI: the late-onset runs and two of the corpus's; a few seconds)
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from harness.analysis.decision import within_run  # noqa: E402
from harness.analysis.kinds import GOOD  # noqa: E402
from harness.analysis.sequential import LiveDecider  # noqa: E402
from harness.matrixfile.model import BUDGET_CAP  # noqa: E402
from harness.protocol.ingest import READ_CHUNK, Record, SeriesReader  # noqa: E402
from harness.protocol.series import Series  # noqa: E402
from harness.runtimes.base import RunOutcome  # noqa: E402
from harness.thresholds import AnalysisConfig  # noqa: E402

DATA = ROOT / "tests" / "data"
RECORDED = DATA / "live-full"
MIN_ITERATIONS = 50          # `RunSettings.min_iterations`'s default, as a sweep has it
QUICK = ("late-onset/", "corpus/control_arena.", "corpus/leak_cbor2_long_string.")


@dataclass(frozen=True)
class Compared:
    """One full run and the live look replayed on it."""

    name: str
    full: str               # the full run's verdict
    live: str               # the verdict of the run as the look stopped it ("" none)
    calls: int              # measured calls at the look's decision (0: none)
    saved_s: float          # the measured seconds after the decision

    @property
    def agree(self) -> bool:
        return not self.live or self.live == self.full or {self.live, self.full} <= GOOD


def measured_s(series: Series) -> float:
    """The measured phase's seconds: the end record's, else its samples' span."""
    phases = (series.end or {}).get("phases") or {}
    if isinstance(phases.get("measure"), int | float):
        return float(phases["measure"])
    t = [float(s["t"]) for s in series.samples if s.get("phase") == "measure" and "t" in s]
    return t[-1] - t[0] if t else 0.0


def stopped(series: Series, upto: int, calls: int, seconds: float) -> Series:
    """The run as a live stop after record `upto` leaves it: those records, and the end
    record the agent writes on a stop."""
    end: dict[str, Any] = {k: v for k, v in (series.end or {}).items() if k != "collected"}
    end.update(iterations=calls, stopped_early=True, budget_spent=False,
               phases={**(end.get("phases") or {}), "measure": seconds})
    return Series(header=series.header, end=end, samples=series.samples[:upto])


def compared(name: str, series: Series, cfg: AnalysisConfig | None = None) -> Compared:
    """The full run's verdict beside the live look's on `series` (a full run)."""
    cfg = cfg or AnalysisConfig()
    outcome = RunOutcome(exit_code=0)
    full = str(within_run(series, outcome, cfg, again=False).verdict)
    took = measured_s(series)
    decider = LiveDecider(cfg, MIN_ITERATIONS, BUDGET_CAP)
    if series.header is not None:
        decider.feed(Record("header", 0, series.header))
    if decider.budget <= 0:         # a fixed-length run: its length is its budget
        decider.budget = took
    for k, fields in enumerate(series.samples):
        if (found := decider.feed(Record("sample", 0, fields))) is not None:
            cut = stopped(series, k + 1, found.iterations, found.seconds)
            live = str(within_run(cut, outcome, cfg, again=False).verdict)
            return Compared(name, full, live, found.iterations,
                            max(took - found.seconds, 0.0))
    return Compared(name, full, "", 0, 0.0)


def read_run(path: Path) -> Series:
    """A samples file, plain or gzipped (the corpus's runs: their step times make a
    5 s run of a fast step a megabyte)."""
    reader = SeriesReader()
    with (gzip.open(path) if path.suffix == ".gz" else path.open("rb")) as fh:
        while not reader.full and (chunk := fh.read(READ_CHUNK)):
            reader.feed_bytes(chunk)
    return reader.finish()


def full_runs(quick: bool = False, more: tuple[Path, ...] = ()
              ) -> Iterator[tuple[str, Series]]:
    """(name, series) of every recorded full run in the repository (and under `more`)
    that ended as a run does (its end record `ok`), in a steady order; `quick`:
    `QUICK`'s only."""
    paths = sorted(RECORDED.glob("*/*.jsonl*"))
    if not quick:
        paths += sorted((DATA / "recorded").glob("*.jsonl"))
        paths += sorted(DATA.glob("h100/**/cells/*/samples.jsonl"))
        paths += sorted(p for d in more for p in d.glob("*.jsonl*"))
    seen: set[str] = set()
    for path in paths:
        name = str(path.relative_to(path.parents[1] if path.parent.parent == RECORDED
                                    or path.parent in more else DATA))
        if (quick and not name.startswith(QUICK)) or name in seen:
            continue            # a run of `more` the repository holds too: once
        seen.add(name)
        series = read_run(path)
        end = series.end or {}
        if end.get("status") == "ok" and not end.get("stopped_early"):
            yield name.removesuffix("/samples.jsonl").split(".jsonl")[0], series


def table(rows: list[Compared]) -> str:
    out = [f"{'run':58} {'full':10} {'live':10} {'at call':>7} {'agree':5} {'saved s':>7}"]
    for r in rows:
        out.append(f"{r.name:58} {r.full:10} {r.live or '-':10} "
                   f"{r.calls or '-':>7} {'yes' if r.agree else 'NO':5} {r.saved_s:7.2f}")
    agree = sum(r.agree for r in rows)
    stops = [r.saved_s for r in rows if r.live]
    out.append(f"live and full agree: {agree}/{len(rows)} ({100 * agree / max(len(rows), 1):.0f} %)"
               f"; the live look stopped {len(stops)} runs, saving {sum(stops):.1f} s "
               f"(median {sorted(stops)[len(stops) // 2] if stops else 0.0:.2f} s a stopped run)")
    return "\n".join(out)


def sanitized(text: str, scenario: str) -> str:
    """A samples file's text with the header's scenario path made `scenario` and its
    package list dropped (paths of the machine that recorded it stay off the record)."""
    lines = text.splitlines(keepends=True)
    head = json.loads(lines[0])
    head.update(scenario=scenario, packages={})
    return json.dumps(head, separators=(",", ":")) + "\n" + "".join(lines[1:])


def record_corpus(names: list[str], into: Path) -> None:
    """Each case's releases run for the 5 s budget with the live look off, their
    samples written gzipped into `into`."""
    from corpuskit.cases import load_all
    from corpuskit.sweep import matrix_yaml

    into.mkdir(parents=True, exist_ok=True)
    for case in load_all(names or None):
        doc = json.loads(matrix_yaml(case))
        doc.pop("baseline", None)
        doc["defaults"].update(min_iterations=BUDGET_CAP, max_iterations=BUDGET_CAP,
                               repeats=0, rounds=0)
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "m.yaml").write_text(json.dumps(doc))
            done = subprocess.run([sys.executable, "-m", "harness", "sweep", "m.yaml",
                                   "--out", "r", "-q"], cwd=d, capture_output=True,
                                  text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
            cells = sorted(Path(d).glob("r/*/*/cells/*/samples.jsonl"))
            for path in cells:
                label = path.parent.name.rsplit(".", 2)[0]     # image.gpu.scenario
                target = into / f"{case.slug}.{label}.jsonl.gz"
                text = sanitized(path.read_text(), str(case.path.relative_to(ROOT)))
                target.write_bytes(gzip.compress(text.encode(), mtime=0))
                print(f"recorded {target.name}", flush=True)
            if not cells:
                print(f"{case.slug}: no cell ran (exit {done.returncode}): "
                      f"{done.stderr.strip()[-300:]}", flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="CI: a few recorded runs")
    p.add_argument("--record-corpus", nargs="*", metavar="CASE",
                   help="record the corpus's cases (all, or those named) first")
    p.add_argument("--into", type=Path, default=RECORDED / "corpus",
                   help="where --record-corpus writes (default: the repository's runs)")
    p.add_argument("--runs", type=Path, action="append", default=[],
                   help="a directory of recorded runs (*.jsonl, *.jsonl.gz) to add")
    args = p.parse_args()
    if args.record_corpus is not None:
        record_corpus(args.record_corpus, args.into)
    more = tuple(d.resolve() for d in args.runs)
    rows = [compared(name, series) for name, series in full_runs(args.quick, more)]
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
