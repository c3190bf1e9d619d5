"""`harness history reports/NAME`: every sweep-kind run of a matrix (a re-decided copy for
its run) read through the gate and joined, running none: a line per report row and host
("ROW @ HOST"), images in release order, per line and image every run's reading, oldest
first. Flaky: same run key, good in one run and bad in another. history.html is written,
with the exit code and notes (`cli.history` parses and prints); the latest verdicts go
through the one report model, so first bad, grid and heatmap are every report's.
"""

from __future__ import annotations

import dataclasses
import io
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from harness.analysis.kinds import BAD, GOOD, LOOKS, STALE, UNREADABLE
from harness.analysis.records import human_seconds
from harness.answers.search import RowAnswer
from harness.app import answer
from harness.app.command import exit_code
from harness.errors import EXIT_OK, EXIT_UNDECIDED, InputError, StoreError, without_out
from harness.matrixfile.releases import release_order
from harness.report.grid import Grid, conclusions, console_width, token, wrap
from harness.report.html import environment, in_kib, kind_css, memory_point, row_trends, step_point
from harness.report.model import Report
from harness.result.model import CellResult, Planned, cell_text, image_places
from harness.result.runkey import RunKey
from harness.store.gate import read_gated
from harness.store.results import atomic_write_text
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


def history_of(root: Path) -> tuple[History, Report]:
    """The runs under `root` joined, and the report model of their latest verdicts.

    Raises:
        InputError: no run under `root`.
    """
    history = read_history(root)
    return history, latest_report(history)


def written(history: History, report: Report, root: Path) -> Path:
    """history.html beside the runs; its path.

    Raises:
        StoreError: it cannot be written (with the fix that prints it without writing).
    """
    try:
        return write_html(history, report)
    except StoreError as exc:
        raise without_out(exc, f"harness history {root} --no-html prints it "
                               "without writing") from exc


def closing(history: History, report: Report) -> tuple[int, list[str]]:
    """The exit code as `harness report` gives it on the latest verdicts (4 too for an
    unreadable run left out), and the notes said after the table."""
    code = exit_code(report)
    note = report.incomplete_note()
    notes = [*stale_note(history.runs[-1].path), *([f"\n{note}"] if note else [])]
    if code == EXIT_OK and any("does not read" in n for n in history.notes):
        return EXIT_UNDECIDED, notes
    return code, notes


def stale_note(newest: Path) -> list[str]:
    """The newest run's stale cells (its verdicts are not the matrix's now), with a fix."""
    found, _ = read_gated(newest)
    if not found.stale:
        return []
    return [f"\n{len(found.stale)} cell(s) of the newest run ({newest.name}) ran before "
            f"their inputs changed ({next(iter(found.stale.values()))}); its verdicts are "
            f"not the matrix's now\n  fix: {found.refresh} runs them again"]


def history_json(history: History, report: Report) -> dict[str, object]:
    """The JSON answer: runs, each line's latest readings and flaky images, row answers."""
    lines = []
    for line in history.lines:
        latest = {}
        for image in line.seen:
            s = line.latest(image)
            if s is not None:
                latest[image] = {"run": s.run.tag, "cell": s.cell, "verdict": s.verdict,
                                 "text": cell_text(s.result) if s.result else None,
                                 "why": s.why}
        lines.append({"row": line.row, "host": line.host, "name": line.name,
                      "latest": latest, "flaky": [
                          {"image": f.image, "seen": [{"run": x.run.tag, "verdict": x.verdict}
                                                      for x in f.seen]}
                          for f in line.flaky()]})
    for text in history.notes:
        answer.note(text)
    return {"name": history.name, "dir": str(history.root), "images": list(history.images),
            "runs": [{"tag": r.tag, "name": r.name, "kind": r.kind, "started": r.started,
                      "images": list(r.images), "watch": r.watch} for r in history.runs],
            "lines": lines, "rows": list(report.rows)}


# The renderings: the console and history.html
PAGE = "history.html"       # written into reports/NAME/, never into a run directory
WORDS_IMAGES = 12           # more images than this: the grid, whatever the width
SHOWN_RUNS = 10             # runs shown run by run, newest first: the page stays one size


def latest_report(history: History) -> Report:
    """The report model of every line's latest verdicts (a line as its row)."""
    planned, why = history.unreadable()
    return Report.from_results(history.name, history.latest_results(), {},
                               planned=planned, unreadable=why,
                               outdated=[c for c, w in why.items() if w.startswith("stale:")])


def when(run: Run) -> str:
    """When the run first started, by its directory's name (local clock), zone said."""
    return time.strftime("%Y-%m-%d %H:%M %Z", time.localtime(run.began or run.started))


def run_words(run: Run) -> str:
    """ "r2 20261123-140150 watch of REPO, 2026-11-23 14:01 UTC" """
    what = f"watch of {run.watch}" if run.watch else run.kind
    return f"{run.tag} {run.name} ({what}, {when(run)})"


def step_words(res: CellResult | None, interval: bool = True) -> str:
    """Step time per call: the median, with the early..late medians."""
    p = step_point(res) if res is not None else None
    if p is None:
        return "-"
    if p.hi <= p.lo or not interval:
        return human_seconds(p.value)
    lo, hi = human_seconds(p.lo), human_seconds(p.hi)
    unit = hi.split(" ")[-1]
    if lo.endswith(" " + unit):      # "37.7..38.4 µs", the unit once
        lo = lo.removesuffix(" " + unit)
    return f"{human_seconds(p.value)} ({lo}..{hi})"


def growth_words(res: CellResult | None, interval: bool = True, unit: bool = True) -> str:
    """Memory growth per call in KiB with its confidence interval ("+5.84 KiB (+5.80..)")."""
    p = memory_point(res) if res is not None else None
    if p is None:
        return "-"
    said = in_kib(p.value) if unit else in_kib(p.value).removesuffix(" KiB")
    if p.hi <= p.lo or not interval:
        return said
    lo, hi = (in_kib(v).removesuffix(" KiB") for v in (p.lo, p.hi))
    return f"{said} ({lo}..{hi}{' KiB' if unit else ''})"


def _flaky_at(line: Line) -> dict[str, list[Flaky]]:
    out: dict[str, list[Flaky]] = {}
    for f in line.flaky():
        out.setdefault(f.image, []).append(f)
    return out


def by_run(seen: Sequence[Seen], runs: Sequence[Run]) -> str:
    """A (line, image)'s grid symbol in each of `runs` ("-": not measured)."""
    said = {s.run.tag: s.verdict for s in seen}
    return "".join(token(said[r.tag], None) if r.tag in said else "-" for r in runs)


def _table(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [(indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))).rstrip()
            for r in rows]


@dataclass
class HistoryConsole:
    """The console: words tables where they fit, else one grid; then answers and flakes."""

    history: History
    report: Report

    def render(self, out: TextIO, width: int | None = None) -> None:
        width = console_width(out, width)
        lines = self._head(width)
        few = len(self.report.images) <= WORDS_IMAGES
        for intervals in (True, False) if few or width is None else ():
            words = self._words(intervals, width)   # the intervals go first where too wide
            if width is None or all(len(x) <= width for x in words):
                lines.extend(words)
                break
        else:
            lines.extend(self._grid(width))
        for note in self.history.notes:
            lines.extend(self._say(f"note: {note}", width))
        out.write("".join(f"{x}\n" for x in lines))

    def _say(self, text: str, width: int | None, indent: str = "") -> list[str]:
        return wrap(text, width, indent) if width is not None else [indent + text]

    def _head(self, width: int | None) -> list[str]:
        h = self.history
        n = len(h.runs)
        rows = len({line.row for line in h.lines})
        split = len(h.lines) - rows
        out = self._say(f"history of {h.name}: {n} run{'s' if n != 1 else ''}, "
                        f"{len(self.report.images)} images in release order, {rows} "
                        f"row{'s' if rows != 1 else ''}" + (
                            f" ({split} more line{'s' if split != 1 else ''}: a row "
                            "measured on several hosts has a line per host)"
                            if split else ""), width)
        for run in h.runs:
            out.extend(self._say(run_words(run), width, "  "))
        hosts = sorted({line.host for line in h.lines})
        if len(hosts) == 1:
            out.extend(self._say(f"measured on {hosts[0] or 'an unknown host'}", width))
        return out

    def _words(self, intervals: bool = True, width: int | None = None) -> list[str]:
        out: list[str] = []
        answers = {row.row: row for row in self.report.rows}
        for line in self.history.lines:
            answer = answers.get(line.name)
            flaky = _flaky_at(line)
            out.append("")
            out.extend(self._say(line.name + (
                f"  (host {line.host})" if " @ " not in line.name
                and len({x.host for x in self.history.lines}) > 1 else ""), width))
            shown = self.history.runs[-SHOWN_RUNS:]
            rows = [["image", "latest", "run", f"{shown[0].tag}..{shown[-1].tag}"
                     if len(shown) > 1 else shown[0].tag, "step time/call (early..late)"
                     if intervals else "step time/call", "growth KiB/call (CI)"
                     if intervals else "growth KiB/call"]]
            for image in self.report.images:
                s = line.latest(image)
                if s is None:
                    continue
                marks = [s.verdict]
                if answer is not None and answer.first_bad == image:
                    marks.append("first bad")
                if image in flaky:
                    marks.append("flaky")
                rows.append([image, ", ".join(marks), s.run.tag,
                             by_run(line.seen.get(image, ()), shown),
                             step_words(s.result, intervals),
                             growth_words(s.result, intervals, unit=False)])
            out.extend(_table(rows))
            if answer is not None:
                out.extend(self._say(answer.sentence, width, "  "))
            for image, found in flaky.items():
                for f in found:
                    out.extend(self._say(f"{image}: {f.text()}", width, "  "))
        return out

    def _grid(self, width: int | None) -> list[str]:
        w = width or 100
        r = self.report
        grid = Grid(r.images, r.rows, r.results, w)
        out = ["", *grid.lines(), "", *grid.legend(), "", *conclusions(r.rows, w)]
        flaky = [(line, f) for line in self.history.lines for f in line.flaky()]
        if flaky:
            out.append("")
            for line, f in flaky:
                out.extend(wrap(f"{line.name}: {f.image}: {f.text()}", w))
        out.append("")
        out.extend(self._sources(w))
        return out

    def _sources(self, width: int) -> list[str]:
        """Which run each line's latest verdicts came from (once if one run gave all)."""
        per_line: list[tuple[Line, dict[str, list[str]]]] = []
        for line in self.history.lines:
            by_run: dict[str, list[str]] = {}
            for image in self.report.images:
                s = line.latest(image)
                if s is not None:
                    by_run.setdefault(s.run.tag, []).append(image)
            per_line.append((line, by_run))
        tags = {tag for _, by_run in per_line for tag in by_run}
        if len(tags) == 1:
            return wrap(f"every latest verdict from {tags.pop()}", width)
        out = ["latest verdicts from:"]
        for line, by_run in per_line:
            parts = [f"{tag} ({', '.join(images)})" if len(by_run) > 1
                     and len(images) <= 3 else f"{tag} ({len(images)} images)"
                     for tag, images in sorted(by_run.items(), key=lambda kv: -len(kv[1]))]
            out.extend(wrap(f"{line.name}: {'; '.join(parts)}", width, "  "))
        return out


@dataclass(frozen=True)
class Tile:
    """One (line, image) of one run, or its latest, on the page."""

    image: str
    verdict: str
    title: str
    href: str
    first_bad: bool = False
    flaky: bool = False

    @property
    def css(self) -> str:
        return "k-" + self.verdict.replace(" ", "-") if self.verdict else ""


def _href(s: Seen) -> str:
    """The cell's plots, relative to reports/NAME/: its page, else its report's anchor."""
    page = s.run.path / "cells" / s.cell / "cell.html"
    if page.is_file():
        return f"{s.run.name}/cells/{s.cell}/cell.html"
    return f"{s.run.name}/report.html#{s.cell}"


def _tile(image: str, s: Seen | None, line: str, first_bad: bool = False,
          flaky: bool = False, latest: bool = True) -> Tile:
    """A square: its verdict and run; the latest's says its line and figures too."""
    if s is None:
        return Tile(image, "", f"{image}: not measured", "")
    if not latest:
        return Tile(image, s.verdict, f"{image}: {s.verdict} in {s.run.tag}", _href(s),
                    first_bad, flaky)
    said = f"step {step_words(s.result)}; growth {growth_words(s.result)}" \
        if s.result is not None else s.why
    return Tile(image, s.verdict, f"{image} {line}: {s.verdict} in {s.run.tag} "
                f"({s.run.name}); {said}", _href(s), first_bad, flaky)


@dataclass(frozen=True)
class LineView:
    line: Line
    answer: RowAnswer | None
    latest: list[Tile]
    runs: list[tuple[Run, list[Tile]]]      # the newest SHOWN_RUNS that measured the line
    flaky: list[str]
    trends: list[str]
    older: int = 0                          # runs that measured it too, not drawn


def render_html(history: History, report: Report, out: TextIO) -> None:
    """history.html: the latest verdicts' heatmap, then per line its runs and trends."""
    answers = {row.row: row for row in report.rows}
    views: list[LineView] = []
    shown: set[str] = set()
    for line in history.lines:
        answer = answers.get(line.name)
        flaky = _flaky_at(line)
        latest = [_tile(img, line.latest(img), line.name,
                        answer is not None and answer.first_bad == img, img in flaky)
                  for img in report.images]
        runs: list[tuple[Run, list[Tile]]] = []
        older = 0
        for run in reversed(history.runs):      # the newest first, up to SHOWN_RUNS
            if len(runs) == SHOWN_RUNS:
                older += any(s.run is run for seen in line.seen.values() for s in seen)
                continue
            own = {img: next((s for s in line.seen.get(img, ()) if s.run is run), None)
                   for img in report.images}
            if any(s is not None for s in own.values()):
                hatched = {img for img, found in flaky.items()
                           if any(own[img] is s for f in found for s in f.seen)}
                runs.append((run, [_tile(img, own[img], line.name, flaky=img in hatched,
                                         latest=False) for img in report.images]))
        runs.reverse()
        shown.update(t.verdict for t in latest if t.verdict)
        shown.update(t.verdict for _, tiles in runs for t in tiles if t.verdict)
        trends = [str(svg) for svg in row_trends(answer, report.images, report.results)] \
            if answer is not None else []
        views.append(LineView(line, answer, latest, runs,
                              [f"{img}: {f.text()}" for img, found in flaky.items()
                               for f in found], trends, older))
    legend = [k for k in LOOKS if k in shown]   # kinds worst first, then the report's own
    template = environment().get_template("history.html.j2")
    out.write(template.render(history=history, images=report.images, views=views,
                              legend=legend, kind_css=kind_css(), run_words=run_words,
                              when=when))


def write_html(history: History, report: Report) -> Path:
    """history.html into reports/NAME/ (beside the runs, never inside one).

    Raises:
        StoreError: the directory cannot be written.
    """
    text = io.StringIO()
    render_html(history, report, text)
    path = history.root / PAGE
    atomic_write_text(path, text.getvalue())
    return path
