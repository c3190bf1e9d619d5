"""`harness history reports/NAME`: every sweep-kind run of a matrix (a re-decided copy for
its run) joined, running none: a line per report row and host ("ROW @ HOST"), images in
release order, per line and image every run's reading, oldest first. Flaky: same run key,
good in one run and bad in another.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

from harness.analysis.kinds import BAD, GOOD, STALE, UNREADABLE
from harness.errors import InputError
from harness.matrixfile.releases import release_order
from harness.result.model import CellResult, Planned, image_places
from harness.result.runkey import RunKey
from harness.store.gate import read_gated
from harness.store.runs import (
    REANALYZED,
    SWEEP_RESULTS,
    begun_of,
    finished,
    kind_of,
    matrix_named,
    name_of,
    started_of,
    sweep_again,
)

_REDECIDED = re.compile(r"-reanalyzed(?:-\d+)?$")
WATCH_MARK = "# harness watch "     # the first line of a watch run's matrix.yaml


@dataclass(frozen=True)
class Run:
    """One run directory: its tag (r1 the oldest), kind, start, images, watched repo."""

    path: Path
    tag: str
    kind: str
    started: float
    images: tuple[str, ...]
    watch: str = ""
    began: float = 0.0      # its first start, as its directory's name says (not resumed)

    @property
    def name(self) -> str:
        return self.path.name


@dataclass(frozen=True)
class Seen:
    """One run's reading of a (line, image): its result, or why it does not read."""

    run: Run
    cell: str
    result: CellResult | None
    why: str = ""
    stale: str = ""         # what changed since it ran (the gate), "" where current

    @property
    def verdict(self) -> str:
        if self.stale:
            return STALE
        return str(self.result.verdict) if self.result is not None else UNREADABLE


@dataclass(frozen=True)
class Flaky:
    """Runs of one image and run key, good in one and bad in another, oldest first."""

    image: str
    seen: tuple[Seen, ...]

    def text(self) -> str:
        """ "flaky: ok in r1, leak in r3" """
        return "flaky: " + ", ".join(f"{s.verdict} in {s.run.tag}" for s in self.seen)


@dataclass(frozen=True)
class Line:
    """A row on one host, across every run: image -> its readings, oldest first."""

    row: str
    host: str
    name: str
    seen: dict[str, tuple[Seen, ...]]

    def latest(self, image: str) -> Seen | None:
        """The newest current reading, else the newest at all (unreadable or stale)."""
        found = self.seen.get(image, ())
        readable = [s for s in found if s.result is not None and not s.stale]
        if readable:
            return readable[-1]
        return found[-1] if found else None

    def flaky(self) -> list[Flaky]:
        """Per image, each group of same-key runs that went both good and bad."""
        out: list[Flaky] = []
        for image, found in self.seen.items():
            groups: list[tuple[RunKey | None, list[Seen]]] = []
            for s in found:
                if s.result is None:
                    continue
                key = s.result.key
                same = next((g for k, g in groups if k == key), None)
                if same is None:
                    groups.append((key, [s]))
                else:
                    same.append(s)
            for _, group in groups:
                classes = {"good" if s.verdict in GOOD else "bad" if s.verdict in BAD
                           else "" for s in group}
                if {"good", "bad"} <= classes:
                    out.append(Flaky(image, tuple(s for s in group
                                                  if s.verdict in GOOD | BAD)))
        return out


@dataclass(frozen=True)
class History:
    """Every sweep-kind run of one matrix, joined per line over images in release order."""

    name: str
    root: Path
    runs: tuple[Run, ...]           # oldest first
    images: tuple[str, ...]         # release order
    lines: tuple[Line, ...]
    notes: tuple[str, ...] = ()     # runs left out, and why

    def latest_results(self) -> dict[str, CellResult]:
        """Each line's latest readable results for the report model, as `RUN/CELL` ids."""
        place = {image: i for i, image in enumerate(self.images)}
        out: dict[str, CellResult] = {}
        for line in self.lines:
            for image in line.seen:
                s = line.latest(image)
                if s is None or s.result is None or s.stale:
                    continue
                res = s.result
                cid = f"{s.run.name}/{s.cell}"
                out[cid] = dataclasses.replace(
                    res, id=cid, row=line.name,
                    image=dataclasses.replace(res.image, index=place[image]))
        return out

    def unreadable(self) -> tuple[tuple[Planned, ...], dict[str, str]]:
        """Every (line, image) as a planned cell, and why each unread one is missing."""
        place = {image: i for i, image in enumerate(self.images)}
        planned: list[Planned] = []
        why: dict[str, str] = {}
        for line in self.lines:
            for image in line.seen:
                s = line.latest(image)
                if s is None:
                    continue
                cid = f"{s.run.name}/{s.cell}"
                planned.append(Planned(cid, line.name, image, place[image]))
                if s.result is None or s.stale:
                    why[cid] = s.why or f"stale: {s.stale}"
        return tuple(planned), why


def _read_cells(path: Path) -> tuple[dict[str, CellResult], dict[str, str], tuple[Planned, ...],
                                     dict[str, str]]:
    """A run as the gate reads it: results, unread cells, plan, and stale cells.

    Raises:
        InputError: a result.json or plan.json of the wrong shape (named with the key).
    """
    found, _ = read_gated(path)
    gone = dict(found.unreadable)
    results = {**found.results, **found.was}
    for p in found.planned:
        if p.id not in results:
            gone.setdefault(p.id, "not run (no result.json)")
    return results, gone, found.planned, dict(found.stale)


def _watched(path: Path) -> str:
    """The repository a `harness watch` run checked, from its matrix.yaml's first line."""
    try:
        with (path / "matrix.yaml").open(encoding="utf-8") as f:
            first = f.readline()
    except (OSError, UnicodeDecodeError):
        return ""
    if not first.startswith(WATCH_MARK):
        return ""
    return first[len(WATCH_MARK):].split(": ", 1)[0].strip()


def host_of(res: CellResult) -> str:
    """Where a cell was measured: "builder (docker, NVIDIA H100 80GB HBM3)"."""
    h = res.host
    where = h.machine or "unknown machine"
    if h.url:
        where = f"{h.label or h.url} ({h.url} from {where})" if h.label else h.url
    gpus = sorted(set(res.fingerprint.gpu_names())) if res.fingerprint.gpu else []
    what = ", ".join([res.runtime or "unknown runtime", *gpus])
    return f"{where} ({what})"


def run_dirs(root: Path) -> tuple[list[Path], list[str]]:
    """The sweep-kind run directories under `root`, and notes on those left out.

    Raises:
        InputError: `root` is not a directory, is a run directory, or holds no sweep run.
    """
    if not root.is_dir():
        what = "a file" if root.exists() else "no such directory"
        raise InputError(f"{root}: {what}; give reports/NAME, the directory of a matrix's "
                         "runs (harness sweep and harness watch write reports/NAME/<timestamp>)")
    kind = kind_of(root)
    if kind is not None:
        raise InputError(f"{root}: a run directory ({kind}), not a matrix's; give "
                         f"reports/NAME, the directory above it: harness history {root.parent}")
    every = sorted(p for p in root.iterdir() if kind_of(p) in SWEEP_RESULTS)
    found = [p for p in every if finished(p)]
    if every and not found:
        raise InputError(f"{root}: no run here holds a finished cell (sweeps stopped "
                         f"before their first cell); run the sweep again: "
                         f"{sweep_again(every[-1])}")
    if not found:
        below = sorted(p.name for p in root.iterdir() if p.is_dir() and kind_of(p) is None
                       and any(kind_of(q) in SWEEP_RESULTS for q in p.iterdir()))
        hint = (f"; it holds the runs of {', '.join(below)}: harness history "
                f"{root / below[0]}" if below else "")
        raise InputError(f"{root}: no run of a sweep here (no <timestamp>/ directory with "
                         "a plan.json of kind sweep or reanalyzed); give reports/NAME, the "
                         "directory harness sweep or harness watch wrote the runs into"
                         + hint)
    # A re-decided copy stands for the run it was made from; the newest copy wins.
    copies: dict[str, Path] = {}
    for p in found:
        if kind_of(p) == REANALYZED and _REDECIDED.search(p.name):
            source = _REDECIDED.sub("", p.name)
            best = copies.get(source)
            if best is None or started_of(p) > started_of(best):
                copies[source] = p
    kept: list[Path] = []
    notes: list[str] = [f"{p.name}: left out, no finished cell (a sweep stopped before "
                        "its first cell)" for p in every if not finished(p)]
    for p in found:
        source = _REDECIDED.sub("", p.name) if kind_of(p) == REANALYZED else p.name
        if p.name in copies and copies[p.name] != p:
            notes.append(f"{p.name}: read as its re-decided copy {copies[p.name].name}")
        elif source in copies and copies[source] != p:
            notes.append(f"{p.name}: a re-decided copy older than {copies[source].name}")
        else:
            kept.append(p)
    return one_matrix(kept, notes)


def one_matrix(runs: list[Path], notes: list[str]) -> tuple[list[Path], list[str]]:
    """The runs of the newest sweep's matrix file; another file's runs become notes."""
    # Each run's file, read once; "" for a watch run, which joins its suite's
    watched = {p for p in runs if _watched(p)}
    named = {p: "" if p in watched else matrix_named(p) for p in runs}
    swept = [p for p in runs if p not in watched]
    file = named[max(swept, key=_by_start)] if swept else ""
    if not file:
        return runs, notes
    same = Path(file).resolve()
    other = [p for p in runs if named[p] and Path(named[p]).resolve() != same]
    notes = notes + [f"{p.name}: left out, a run of {named[p]}, not of {file} (the "
                     "two files share `name:`; harness history reads the newest run's file)"
                     for p in other]
    return [p for p in runs if p not in other], notes


def _by_start(path: Path) -> tuple[float, str]:
    return started_of(path), path.name


def _seen_order(s: Seen) -> tuple[float, str]:
    return s.run.started, s.run.tag


def read_history(root: Path) -> History:
    """Every sweep-kind run under `root` (reports/NAME) joined per line.

    Raises:
        InputError: `root` is not a matrix's directory of runs (see `run_dirs`).
    """
    paths, notes = run_dirs(root)
    paths.sort(key=_by_start)
    runs: list[Run] = []
    readings: list[tuple[Run, dict[str, CellResult], dict[str, str], tuple[Planned, ...],
                         dict[str, str]]] = []
    for path in paths:
        try:
            results, unreadable, planned, stale = _read_cells(path)
        except InputError as exc:
            notes.append(f"{path.name}: left out, it does not read: {exc}")
            continue
        index = image_places(results, planned)
        images = tuple(label for _, label in sorted((i, label) for label, i in index.items()))
        run = Run(path, f"r{len(runs) + 1}", kind_of(path) or "", started_of(path), images,
                  _watched(path), begun_of(path))
        runs.append(run)
        readings.append((run, results, unreadable, planned, stale))
    if not runs:
        raise InputError(f"{root}: no run here reads; " + "; ".join(notes))
    images = tuple(release_order([r.images for r in reversed(runs)]))
    # (row, host) -> image -> readings, in run order (oldest first)
    table: dict[tuple[str, str], dict[str, list[Seen]]] = {}
    lost: dict[tuple[str, str], list[Seen]] = {}          # (row, image): unreadable
    for run, results, unreadable, planned, stale in readings:
        for cid, res in results.items():
            table.setdefault((res.row, host_of(res)), {}).setdefault(
                res.image.label, []).append(Seen(run, cid, res, stale=stale.get(cid, "")))
        where = {p.id: p for p in planned}
        for cid, why in unreadable.items():
            p = where.get(cid)
            if p is not None:
                lost.setdefault((p.row, p.image), []).append(Seen(run, cid, None, why))
    hosts: dict[str, list[str]] = {}
    for row, host in table:
        hosts.setdefault(row, []).append(host)
    for (row, image), seen in lost.items():
        homes = hosts.setdefault(row, [])
        if not homes:
            homes.append("")
            table[(row, "")] = {}
        for host in homes:
            table[(row, host)].setdefault(image, []).extend(seen)
    lines = []
    for row in sorted(hosts):
        for host in sorted(hosts[row]):
            several = len(hosts[row]) > 1
            name = f"{row} @ {host or 'unknown host'}" if several else row
            by_image = table[(row, host)]
            lines.append(Line(row, host, name, {
                image: tuple(sorted(by_image[image], key=_seen_order))
                for image in images if image in by_image}))
    name = name_of(runs[-1].path) or root.name
    return History(name, root, tuple(runs), images, tuple(lines), tuple(notes))


def flaky_lines(history: History) -> list[tuple[Line, list[Flaky]]]:
    """The lines with a flaky image, each with its flaky images."""
    return [(line, found) for line in history.lines if (found := line.flaky())]


__all__ = ["Flaky", "History", "Line", "Run", "Seen", "flaky_lines", "host_of",
           "read_history", "run_dirs"]

