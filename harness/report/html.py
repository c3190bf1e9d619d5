"""report.html: one self-contained page, plots drawn as inline SVG (works offline).

The Jinja2 templates ship as package data (`harness/report/templates/`) and are
autoescaped: scenario ids, reasons and tracebacks come from the cells and may hold
anything, `<script>` included. Only the SVG from `harness.report.svg`, which escapes
its own text, is passed as `Markup`.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from harness.analysis.kinds import IN_DOUBT, LOOKS, kind
from harness.analysis.trends import human_seconds
from harness.answers.search import RowAnswer
from harness.errors import StoreError
from harness.protocol.series import Series
from harness.report.cellplots import RowScales, memory_plot, row_scales, sources_of, step_plot
from harness.report.model import Report, Reporter, steps_vs_baseline
from harness.report.trend import KIND_COLOURS, row_trends
from harness.result.codec import JSON


@dataclass
class CellView:
    id: str
    image: str
    verdict: str
    reason: str
    numbers: str
    role: str = ""                  # "first-bad", "last-good" or ""
    plots: list[Markup] = field(default_factory=list)
    traceback: str = ""
    problems: list[str] = field(default_factory=list)
    note: str = ""
    links: list[tuple[str, str]] = field(default_factory=list)   # (text, relative href)
    vs: str = ""                    # step time against the row's baseline, as far as known
    where: list[str] = field(default_factory=list)   # `harness explain`: sites, diffed
    where_head: str = ""
    # The diff as a table, (what, site, bad, good) under (bad, good) image labels; then
    # `where` holds only the notes.
    where_table: list[tuple[str, str, str, str]] = field(default_factory=list)
    where_labels: tuple[str, str] = ("", "")

    @property
    def kind(self) -> str:
        return kind(self.verdict).css


def unsaid(numbers: str, reason: str) -> str:
    """The card's figures less the clauses its reason already says: "no leak above 128
    B/call in 300 calls" was printed in the reason and again in the brackets."""
    return ", ".join(part for part in numbers.split(", ") if part not in reason)


def cell_view(report: Report, cid: str, role: str, series: Series | None = None,
              scales: RowScales | None = None, baseline: tuple[str, Series] | None = None
              ) -> CellView:
    res = report.results[cid]
    err = res.end.error
    view = CellView(cid, res.image.label, res.verdict, res.reason,
                    unsaid(report.numbers_of(cid), res.reason), role,
                    traceback=err.traceback if err else "", problems=list(res.problems))
    view.where = report.where_lines(cid)
    if view.where:
        ex = report.explained[cid]
        view.where_head = (f"where ({ex.role}" + (f", against {ex.paired}" if ex.paired else "")
                           + f"; {ex.calls} calls with attribution)")
        if ex.table:
            view.where_table, view.where_labels = list(ex.table), ex.labels
            view.where = list(ex.notes)
    vs = res.vs_baseline
    if vs is not None and (vs.confirmation is not None or vs.steps is not None):
        view.vs = f"step time vs {vs.baseline}: {steps_vs_baseline(vs)}"
    series = series or report.series(cid)
    if series is None:
        view.note = "no samples.jsonl next to this result: no plots"
        return view
    if report.root is not None:
        for text, name in (("samples", "samples.jsonl"), ("log", "agent.log"),
                           ("result", "result.json"), ("where", "where.json")):
            if (report.root / "cells" / cid / name).is_file():
                view.links.append((text, f"cells/{cid}/{name}"))
    scales = scales or RowScales()
    for key, name in sources_of(series, res.runtime):
        view.plots.append(memory_plot(series, key, name, res.memory.get(name),
                                      scales.spans.get(key), fitted=name != "cgroup"))
    if any(s.get("src") == "step" for s in series.samples):
        view.plots.append(step_plot(series, res.steps, scales.steps, baseline))
    if not view.plots:
        view.note = "samples.jsonl holds no samples"
    return view


def split_diff(diff: list[tuple[str, str, str]], fold_after: int
               ) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """(rows shown, pip rows folded into <details>): pip rows fold when there are many."""
    pips = [d for d in diff if d[0].startswith("pip ")]
    if len(pips) <= fold_after:
        return diff, []
    return [d for d in diff if not d[0].startswith("pip ")], pips


def meta_items(meta: Mapping[str, JSON]) -> list[tuple[str, str]]:
    """The run's facts in words: a date, not an epoch; no 'baseline: None'."""
    out: list[tuple[str, str]] = []
    for key, value in sorted(meta.items()):
        if key in ("started", "resumed") and isinstance(value, int | float):
            value = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(value))
        elif key == "seconds" and isinstance(value, int | float):
            key, value = "took", human_seconds(float(value))
        elif key == "baseline" and value is None:
            value = "each row's first image"
        out.append((key, str(value)))
    return out


@functools.cache
def environment() -> Environment:
    """The template environment: package data, autoescape on, undefined names fail.
    One a process, so each template is compiled once (report.html.j2: ~70 ms)."""
    return Environment(loader=PackageLoader("harness.report", "templates"),
                       autoescape=select_autoescape(default=True, default_for_string=True),
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


INLINE_CELLS = 60   # up to this many cells, their plots are on report.html itself
PAGE = "cell.html"  # above it, on cells/<id>/cell.html, one page per cell


@dataclass(frozen=True)
class Tile:
    """One cell of the overview (the words table and the heatmap)."""

    id: str
    image: str
    text: str          # the cell in words
    verdict: str
    role: str          # "first-bad", "last-good" or ""
    href: str          # its plots: "#<id>" on this page, or its own page; "" if none
    sort_key: str

    @property
    def kind(self) -> str:
        return LOOKS[self.verdict].css if self.verdict in LOOKS else "other"

    @property
    def css(self) -> str:
        return "k-" + self.verdict.replace(" ", "-")


def page_of(cid: str) -> str:
    return f"cells/{cid}/{PAGE}"


def roles(row: RowAnswer) -> dict[str, str]:
    return {label: "first-bad" if label == row.first_bad else
            "last-good" if label == row.last_good else "" for label, _, _ in row.cells}


def kind_css() -> Markup:
    """One CSS class per verdict kind, its heatmap colour."""
    return Markup("".join(f".k-{k.replace(' ', '-')}{{background:{c}}}"
                          for k, c in KIND_COLOURS.items()))


class HtmlReporter(Reporter):
    """report.html from a Report (with `root` set, to plot each cell's samples).

    Up to INLINE_CELLS cells, one self-contained page with every cell's plots; above it,
    report.html is the overview (heatmap, each row's trend across images, the words
    table) and each cell's plots are on cells/<id>/cell.html (`write_cells`), so the page
    a person opens stays small and quick at 1,600 cells."""

    @property
    def inline(self) -> bool:
        return len(self.report.results) <= INLINE_CELLS

    @property
    def every_cell(self) -> bool:
        """Whether every cell has its own page and its words on report.html: up to
        `model.LARGE` cells. Above, the page leads with each row's first bad (rows of
        one answer grouped) and only the cells a reader is led to have a page: 10,000
        plotted pages took 40 s, and their words 2 MB of the page."""
        return not self.report.large

    def paged(self) -> set[str]:
        """The cells with a page of their own (above `model.LARGE` cells, each row's
        first bad and last good, and every cell in doubt; else all)."""
        r = self.report
        if self.every_cell:
            return set(r.results)
        return ({cid for row in r.rows for label, _, cid in row.cells
                 if label in (row.first_bad, row.last_good)}
                | {cid for cid, res in r.results.items() if res.verdict in IN_DOUBT}
                ) & set(r.results)

    def render(self, out: TextIO) -> None:
        r = self.report
        header, body = r.table()
        views = self._views(r.rows) if self.inline else {}
        paged = self.paged()
        grid = []
        for row, line in zip(r.rows, body, strict=True):
            said = {label: (verdict, cid) for label, verdict, cid in row.cells}
            role = roles(row)
            tiles = []
            for img, text in zip(r.images, line[1:-1], strict=True):
                verdict, cid = said.get(img, ("", ""))
                res = r.results.get(cid)
                verdict = res.verdict if res is not None else verdict
                href = ("" if res is None or cid not in paged else f"#{cid}" if self.inline
                        else page_of(cid))
                numbers = r.numbers_of(cid)
                key = f"{LOOKS[verdict].severity:02d} {verdict} {numbers}" if cid else "99"
                if not href and res is not None:
                    text = verdict      # its words are in report.md and results.json
                tiles.append(Tile(cid, img, text, verdict, role.get(img, ""), href, key))
            grid.append((row, tiles, row_trends(row, r.images, r.results)))
        # The legend names the colours the heatmap shows, and no other.
        shown = {t.verdict for _, tiles, _ in grid for t in tiles}
        template = environment().get_template("report.html.j2")
        out.write(template.render(report=r, header=header, grid=grid, views=views,
                                  inline=self.inline,
                                  kinds=[k for k in KIND_COLOURS if k in shown],
                                  first_bad=any(row.first_bad for row in r.rows),
                                  kind_css=kind_css(), bad=len(r.bad_cells),
                                  meta=meta_items(r.meta), fold_after=8,
                                  split_diff=split_diff, every_cell=self.every_cell,
                                  groups=groups(grid), leads=leads(grid),
                                  sections=bad_rows_first(grid)))

    def _views(self, rows: list[RowAnswer], only: set[str] | None = None
               ) -> dict[str, CellView]:
        """Each cell's view with its plots, a row at a time (its series read once, on
        the row's scales, the baseline overlaid); `only` limits which cells. Above
        `model.LARGE` cells the scales are those of the row's paged cells and their
        baselines: reading every cell's samples for them took 16 s at 10,000 cells."""
        r = self.report
        views: dict[str, CellView] = {}
        paged = None if self.every_cell else self.paged()
        for row in rows:
            if only is not None and not any(cid in only for _, _, cid in row.cells):
                continue
            read = {cid for _, _, cid in row.cells}
            if paged is not None:
                bases = {vs.baseline for cid in read & paged
                         if (vs := r.results[cid].vs_baseline) is not None}
                read = {cid for label, _, cid in row.cells if cid in paged or label in bases}
            loaded: dict[str, Series] = {}
            for _, _, cid in row.cells:
                if cid not in read:
                    continue
                one = r.series.peek(cid)
                if one is not None:
                    loaded[cid] = one
            runtime = next((r.results[c].runtime for c in loaded if c in r.results), "")
            keys = {k for s in loaded.values() for k in sources_of(s, runtime)}
            scales = row_scales(loaded, sorted(keys))
            by_label = {label: cid for label, _, cid in row.cells}
            role = roles(row)
            for label, _, cid in row.cells:
                if cid not in r.results or (only is not None and cid not in only):
                    continue   # not run or unreadable: the table says which
                vs = r.results[cid].vs_baseline
                base = vs.baseline if vs is not None else None
                base_id = by_label.get(base) if base else None
                baseline = ((base, loaded[base_id]) if base is not None and base_id is not None
                            and base_id in loaded and base_id != cid else None)
                views[cid] = cell_view(r, cid, role.get(label, ""), loaded.get(cid), scales,
                                       baseline)
        return views

    def write_cells(self, root: Path) -> list[Path]:
        """cells/<id>/cell.html for every cell whose page is missing or older than its
        result, samples or where.json (none where report.html holds the plots itself).
        A row's series are read once and let go before the next row's."""
        if self.inline:
            return []
        r = self.report
        template = environment().get_template("cell.html.j2")
        written: list[Path] = []
        paged = self.paged()
        for row in r.rows:
            stale = {cid for _, _, cid in row.cells
                     if cid in paged and _stale(root / "cells" / cid)}
            if not stale:
                continue
            for cid, view in self._views([row], stale).items():
                path = root / page_of(cid)
                _write_page(path, template.render(view=view, row=row, report=r,
                                                  kind_css=kind_css(), up="../.."))
                written.append(path)
        return written


Grid = list[tuple[RowAnswer, list[Tile], list[Markup]]]


def groups(grid: Grid) -> list[Grid]:
    """The rows grouped by their answer (first bad, last good and what changed between
    them), the largest group first, as the console groups them."""
    found: dict[tuple[str, tuple[tuple[str, str, str], ...]], Grid] = {}
    for item in grid:
        found.setdefault((item[0].sentence, tuple(item[0].diff)), []).append(item)
    return sorted(found.values(), key=lambda g: -len(g))


Lead = tuple[RowAnswer, Tile | None, Tile | None]


def leads(grid: Grid) -> list[tuple[str, list[Lead]]]:
    """Each answer (`groups`, those with a first bad first) with its rows, each row with
    its first bad and last good tiles (None where it has none)."""
    out = []
    for group in groups(grid):
        rows = []
        for row, tiles, _ in group:
            by_role = {t.role: t for t in tiles if t.role}
            rows.append((row, by_role.get("first-bad"), by_role.get("last-good")))
        out.append((group[0][0].sentence, rows))
    return sorted(out, key=lambda lead: lead[1][0][0].first_bad is None)


def _write_page(path: Path, text: str) -> None:
    """A cell page, whole or not at all (renamed into place), without the fsync a
    result gets: a page is made again from the cell whenever it is missing.

    Raises:
        StoreError: the cell's directory cannot be written.
    """
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc.strerror}\n  fix: check the results "
                         "directory is writable and its disk not full") from exc


def _stale(cell_dir: Path) -> bool:
    page = cell_dir / PAGE
    try:
        made = page.stat().st_mtime
    except OSError:
        return True
    for name in ("result.json", "samples.jsonl", "where.json"):
        try:
            if (cell_dir / name).stat().st_mtime > made:
                return True
        except OSError:
            continue
    return False


def bad_rows_first(grid: Grid) -> Grid:
    """The rows' sections below the table: those with a bad cell first (each row's
    first bad, then the rows bad throughout), then the clean ones, each in table order;
    a clean row's plots above the bad rows pushed the answer off the first screen."""
    def bad(row: RowAnswer, tiles: list[Tile]) -> bool:
        return bool(row.first_bad or row.scenario_error) or any(
            t.verdict in LOOKS and LOOKS[t.verdict].css == "bad" for t in tiles)

    return ([g for g in grid if bad(g[0], g[1])] + [g for g in grid if not bad(g[0], g[1])])
