"""report.html: one self-contained page, plots as inline SVG (works offline). Templates
autoescape (ids, reasons, tracebacks may hold anything); only `chart`'s SVG, which escapes
its own text, is `Markup`. The overview (`row_trends`) reads no samples, to stay cheap at
thousands of cells.
"""

from __future__ import annotations

import functools
import math
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from itertools import chain, compress
from pathlib import Path
from typing import TextIO

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from harness.analysis.kinds import IN_DOUBT, LOOKS, kind
from harness.analysis.records import (
    MemoryTrend,
    StepTrend,
    human_seconds,
    kib,
    per_call,
    rate_text,
    scaled,
)
from harness.answers.search import RowAnswer
from harness.errors import StoreError
from harness.protocol.series import TREND_NAMES, Series, readings, step_times
from harness.report.model import Report, Reporter, steps_vs_baseline
from harness.result.codec import JSON
from harness.result.model import CellResult
from harness.runtimes.base import own_cgroup


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
    # The diff as (what, site, bad, good) under (bad, good) labels; `where` keeps the notes.
    where_table: list[tuple[str, str, str, str]] = field(default_factory=list)
    where_labels: tuple[str, str] = ("", "")

    @property
    def kind(self) -> str:
        return kind(self.verdict).css


def unsaid(numbers: str, reason: str) -> str:
    """The card's figures less the clauses its reason already says."""
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
    """The template environment (autoescape on, undefined names fail), built once a process."""
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

    Above INLINE_CELLS cells, report.html is the overview and each cell's plots go on their
    own page (`write_cells`), so the page stays small."""

    @property
    def inline(self) -> bool:
        return len(self.report.results) <= INLINE_CELLS

    @property
    def every_cell(self) -> bool:
        """Whether every cell gets a page and its words (up to `model.LARGE`)."""
        return not self.report.large

    def paged(self) -> set[str]:
        """The cells with a page: all, or past `model.LARGE` only those a reader is led to."""
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
        """Each cell's view with its plots, a row at a time; `only` limits the cells."""
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
        """Write the stale or missing cells/<id>/cell.html pages; returns them."""
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
    """The rows grouped by their answer, the largest group first, as the console groups them."""
    found: dict[tuple[str, tuple[tuple[str, str, str], ...]], Grid] = {}
    for item in grid:
        found.setdefault((item[0].sentence, tuple(item[0].diff)), []).append(item)
    return sorted(found.values(), key=lambda g: -len(g))


Lead = tuple[RowAnswer, Tile | None, Tile | None]


def leads(grid: Grid) -> list[tuple[str, list[Lead]]]:
    """Each answer (those with a first bad first) with its rows' first bad and last good tiles."""
    out = []
    for group in groups(grid):
        rows = []
        for row, tiles, _ in group:
            by_role = {t.role: t for t in tiles if t.role}
            rows.append((row, by_role.get("first-bad"), by_role.get("last-good")))
        out.append((group[0][0].sentence, rows))
    return sorted(out, key=lambda lead: lead[1][0][0].first_bad is None)


def _write_page(path: Path, text: str) -> None:
    """Write a cell page whole or not at all, without fsync: it is remade whenever missing.

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
    """The rows' sections, those with a bad cell first, so the answer leads."""
    def bad(row: RowAnswer, tiles: list[Tile]) -> bool:
        return bool(row.first_bad or row.scenario_error) or any(
            t.verdict in LOOKS and LOOKS[t.verdict].css == "bad" for t in tiles)

    return ([g for g in grid if bad(g[0], g[1])] + [g for g in grid if not bad(g[0], g[1])])


COLOURS = {"heap": "#1f77b4", "uss": "#2ca02c", "rss": "#9467bd", "cgroup": "#8c564b",
           "gpu": "#ff7f0e", "fw": "#17becf", "kids": "#e377c2", "step": "#2c3e70",
           "baseline": "#999999"}
MIN_POINTS = 3                  # a source needs this many measured samples for a panel
MIN_SPAN = {"heap": 256 * 1024.0}   # bytes: below this, a row's heap span is noise
DEFAULT_MIN_SPAN = 1024 * 1024.0


def warmup_end(series: Series) -> float | None:
    ends = [float(s["i"]) for s in series.samples if s.get("phase") == "warmup"]
    return max(ends) if ends else None


def measured(series: Series, key: str) -> list[float]:
    return [float(v) for smp in series.samples if smp.get("phase") == "measure"
            and (v := smp.get(key)) is not None]


def memory_plot(series: Series, key: str, name: str, trend: MemoryTrend | None,
                span: float | None = None, fitted: bool = True) -> Markup:
    """Bytes of one source against iteration with the fitted slope.

    With `span`, the y axis is that many bytes tall (the row's largest range), so one row's
    cells compare by eye; the slope is printed large either way."""
    pairs = sorted((float(s["i"]), float(s[key])) for s in series.samples
                   if s.get(key) is not None)
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    fit, note, headline = None, "", ""
    if trend is not None and trend.kind == "insufficient":
        note = f"no readings to fit ({trend.n})"     # never "+0.0 KiB/call"
    elif trend is not None and fitted:
        slope = trend.slope
        mx, my = readings(series.samples, key)
        if len(mx):
            # Theil-Sen's intercept: the median offset of the points from the slope.
            intercept = statistics.median(float(y) - slope * float(x)
                                          for x, y in zip(mx, my, strict=True))
            fit = Fit(slope, intercept, float(mx[0]), float(mx[-1]))
        lo, hi = trend.slope_lo, trend.slope_hi
        unit, scale = per_call(slope)
        ci = (f"CI {scaled(lo, scale, 2)}..{scaled(hi, scale, 2)} {unit}/call, "
              if lo == lo and hi == hi else "")  # not NaN
        headline = rate_text(slope, 2)
        note = f"{ci}{trend.kind}"
    elif not fitted:
        note = "never decisive"
    y_range = None
    values = measured(series, key) or ys
    if span is not None and values:
        low = min(values)
        # bytes are never below zero: the axis starts at 0 at the lowest
        y_range = (max(0.0, low - span * 0.08) if low >= 0 else low - span * 0.08,
                   low + span * 1.08)
    line = Line(xs, ys, COLOURS.get(name, "#333"), name)
    return chart(name, [line], "B", warmup_end(series), fit, note, y_range, headline)


def step_points(series: Series) -> tuple[list[float], list[float]]:
    xs: list[float] = []
    ys: list[float] = []
    for s in series.samples:
        if s.get("src") == "step":
            dt = s["dt"]
            first = int(s["i"]) - len(dt) + 1
            xs.extend(map(float, range(first, first + len(dt))))
            ys.extend(dt)
    return xs, ys


def step_plot(series: Series, steps: StepTrend | None,
              y_range: tuple[float, float] | None = None,
              baseline: tuple[str, Series] | None = None) -> Markup:
    """Seconds per step against iteration, the row's baseline overlaid where compared."""
    xs, ys = step_points(series)
    lines = [Line(xs, ys, COLOURS["step"], "this image")]
    if baseline is not None:
        bx, by = step_points(baseline[1])
        if bx:
            lines.append(Line(bx, by, COLOURS["baseline"], f"baseline {baseline[0]}",
                              dashed=True))
    note = ""
    if steps is not None:
        note = f"late/early {steps.ratio:.2f}x, p={steps.p_value:.2g}"
    times = step_times(series.samples)
    headline = ""
    if times:
        # The trace is timed under the quiet heap, the tables' figure is the user's: say which.
        quiet = series.as_user() is not None and (series.header or {}).get(
            "heap_mode") == "quiet"
        headline = (f"{'quiet-heap ' if quiet else ''}median "
                    f"{human_seconds(statistics.median(times))}")
    if y_range is None:
        y_range = robust_range(times or ys)
    return chart("step time", lines, "s", warmup_end(series), None, note, y_range, headline)


@dataclass
class RowScales:
    """One y scale per source across a row: the memory span and the step-time range."""

    spans: dict[str, float] = field(default_factory=dict)
    steps: tuple[float, float] | None = None


def row_scales(series: Mapping[str, Series], sources: list[tuple[str, str]]) -> RowScales:
    out = RowScales()
    for key, name in sources:
        spans = []
        for one in series.values():
            values = measured(one, key)
            if len(values) >= MIN_POINTS:
                spans.append(max(values) - min(values))
        if spans:
            out.spans[key] = max(max(spans), MIN_SPAN.get(name, DEFAULT_MIN_SPAN))
    ranges = [robust_range(times) for one in series.values()
              if (times := step_times(one.samples))]
    if ranges:
        out.steps = (max(0.0, min(r[0] for r in ranges)), max(r[1] for r in ranges))
    return out


def sources_of(series: Series, runtime: str) -> list[tuple[str, str]]:
    """The memory sources with measured data; cgroup only where the cell had its own."""
    return [(key, name) for key, name in TREND_NAMES.items()
            if len(measured(series, key)) >= MIN_POINTS
            and not (name == "cgroup" and not own_cgroup(runtime))]


# report.html's colour of each verdict, from the one list of verdict kinds.
KIND_COLOURS: dict[str, str] = {name: look.paint for name, look in LOOKS.items()}
TREND_WIDTH, TREND_HEIGHT, TREND_LEFT, TREND_BOTTOM, TREND_TOP = 640, 150, 74, 34, 18
TITLED = 60     # up to this many points a trend names each one on hover; past it, the first bad


@dataclass(frozen=True)
class Point:
    """One cell's figure on a row's trend: value, interval (lo..hi), its verdict."""

    value: float
    lo: float
    hi: float
    verdict: str


def step_point(res: CellResult) -> Point | None:
    """Step time per call: the user's median, banded by early and late medians (scaled
    from the quiet heap's run to the user's terms)."""
    s = res.summary
    median = s.median_step_s
    if median is None:
        return None
    steps = res.steps
    if steps is None or not (steps.early_median_s > 0 and steps.late_median_s > 0):
        return Point(median, median, median, res.verdict)
    scale = median / s.run_step_s if s.user_calls and s.run_step_s else 1.0
    early, late = steps.early_median_s * scale, steps.late_median_s * scale
    return Point(median, min(early, late, median), max(early, late, median), res.verdict)


def memory_point(res: CellResult) -> Point | None:
    """Growth per call (KiB) of the deciding source, else heap, USS, RSS, with its CI."""
    order = [res.deciding_source, "heap", "uss", "rss"]
    source = next((s for s in order if s is not None and s in res.memory), None)
    if source is None:
        return None
    trend = res.memory[source]
    lo, hi = trend.slope_lo, trend.slope_hi
    if not (lo == lo and hi == hi):      # NaN: no interval
        lo = hi = trend.slope
    return Point(trend.slope / 1024, lo / 1024, hi / 1024, res.verdict)


def in_kib(value: float) -> str:
    """A figure already in KiB per call, as the charts say it ("+5.40 KiB")."""
    return f"{kib(value * 1024, 2)} KiB"


def growth_label(value: float, places: int = 2) -> str:
    """A growth per call (KiB) as a chart label, in bytes below 1 KiB."""
    if abs(value) < 1:
        return f"{kib(value * 1024 * 1024, max(places - 1, 1))} B"
    return f"{kib(value * 1024, places)} KiB"


def growth_labels(points: Sequence[Point | None]) -> Callable[[float], str]:
    """`growth_label` with enough decimals to tell the chart's two axis ends apart."""
    known = [p for p in points if p is not None]
    lo = min((p.lo for p in known), default=0.0)
    hi = max((p.hi for p in known), default=0.0)
    places = 2
    while places < 6 and growth_label(lo, places) == growth_label(hi, places):
        places += 1
    return lambda value: growth_label(value, places)


def trend_chart(title: str, labels: Sequence[str], points: Sequence[Point | None],
          first_bad: int | None, say: Callable[[float], str], zero: bool = False) -> Markup:
    """One row's trend: a point per image with its interval, in release order, the
    first bad marked red. `zero`: the axis starts at 0, so heights compare as ratios."""
    known = [p for p in points if p is not None]
    if not known:
        return Markup(f'<p class="noplot">{escape(title)}: no figures</p>')
    lo = min([p.lo for p in known] + ([0.0] if zero else []))
    hi = max(p.hi for p in known)
    if hi - lo <= abs(hi) * 1e-9:
        pad = abs(hi) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    n = max(len(labels), 2)
    plot_w, plot_h = TREND_WIDTH - TREND_LEFT - 10, TREND_HEIGHT - TREND_BOTTOM - TREND_TOP

    def x(i: int) -> float:
        return TREND_LEFT + plot_w * (i + 0.5) / n

    def y(v: float) -> float:
        return TREND_TOP + plot_h * (1 - (v - lo) / (hi - lo))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="trend" width="{TREND_WIDTH}" '
           f'height="{TREND_HEIGHT}" viewBox="0 0 {TREND_WIDTH} {TREND_HEIGHT}" role="img" '
           f'aria-label="{escape(title)}">',
           f'<text x="{TREND_LEFT}" y="12" class="t">{escape(title)}</text>',
           f'<text x="{TREND_LEFT - 4}" y="{y(hi):.0f}" class="a" text-anchor="end" '
           f'dominant-baseline="hanging">{escape(say(hi))}</text>',
           f'<text x="{TREND_LEFT - 4}" y="{y(lo):.0f}" class="a" text-anchor="end">'
           f'{escape(say(lo))}</text>',
           f'<line x1="{TREND_LEFT}" y1="{TREND_TOP + plot_h}" x2="{TREND_WIDTH - 10}" '
           f'y2="{TREND_TOP + plot_h}" stroke="#999"/>']
    if lo < 0 < hi:
        out.append(f'<line x1="{TREND_LEFT}" y1="{y(0):.1f}" x2="{TREND_WIDTH - 10}" '
                   f'y2="{y(0):.1f}" stroke="#ccc" stroke-dasharray="2 2"/>')
    if first_bad is not None:
        out.append(f'<line class="fb" x1="{x(first_bad):.1f}" y1="{TREND_TOP - 4}" '
                   f'x2="{x(first_bad):.1f}" y2="{TREND_TOP + plot_h}" stroke="#c00" '
                   'stroke-width="2"/>')
    step = max(1, math.ceil(n / 12))       # at most about a dozen labels along x
    for i, label in enumerate(labels):
        near = first_bad is not None and i != first_bad and abs(i - first_bad) < step
        if (i % step == 0 and not near) or i == first_bad:
            red = ' fill="#c00"' if i == first_bad else ""
            out.append(f'<text x="{x(i):.1f}" y="{TREND_HEIGHT - TREND_BOTTOM + 14}" class="a" '
                       f'text-anchor="middle"{red}>{escape(label)}</text>')
    path = " ".join(f"{'M' if k == 0 else 'L'}{x(i):.1f},{y(p.value):.1f}"
                    for k, (i, p) in enumerate((i, p) for i, p in enumerate(points)
                                               if p is not None))
    out.append(f'<path d="{path}" fill="none" stroke="#7d8bb3" stroke-width="1"/>')
    bars = " ".join(f"M{x(i):.1f},{y(p.lo):.1f}V{y(p.hi):.1f}"
                    for i, p in enumerate(points) if p is not None and p.hi > p.lo)
    if bars:
        out.append(f'<path d="{bars}" stroke="#555" stroke-width="1"/>')
    titled = len(known) <= TITLED
    dots: dict[str, list[str]] = {}
    for i, p in enumerate(points):
        if p is None:
            continue
        colour = KIND_COLOURS.get(p.verdict, "#888")
        if titled or i == first_bad:
            out.append(f'<circle cx="{x(i):.1f}" cy="{y(p.value):.1f}" r="3" '
                       f'fill="{colour}"><title>{escape(labels[i])}: {escape(say(p.value))}'
                       f' ({escape(say(p.lo))}..{escape(say(p.hi))}), {escape(p.verdict)}'
                       '</title></circle>')
        else:
            dots.setdefault(colour, []).append(f"M{x(i):.1f},{y(p.value):.1f}h0")
    # Past TITLED points, one path of dots per colour: a title per point bloats the page.
    out.extend(f'<path class="dots" d="{" ".join(d)}" stroke="{colour}" stroke-width="6" '
               'stroke-linecap="round"/>' for colour, d in dots.items())
    out.append("</svg>")
    return Markup("".join(out))


def row_trends(row: RowAnswer, images: Sequence[str], results: dict[str, CellResult]
               ) -> list[Markup]:
    """The row's two trends across the report's images: step time and memory growth."""
    by_image = {label: results.get(cid) for label, _, cid in row.cells}
    first = images.index(row.first_bad) if row.first_bad in images else None
    cells = [by_image.get(img) for img in images]
    steps = [step_point(r) if r is not None else None for r in cells]
    memory = [memory_point(r) if r is not None else None for r in cells]
    return [trend_chart("step time per call (median; bar: early..late medians)", images, steps,
                  first, human_seconds, zero=True),
            trend_chart("memory growth per call (bar: the slope's CI)", images, memory, first,
                  growth_labels(memory))]


WIDTH, HEIGHT = 340, 150
LEFT, RIGHT, TOP, BOTTOM = 70, 10, 32, 24
SMALL_CHAR_PX = 4.6     # a character at font-size 8: 3.9-4.4 px in Chromium's sans-serif on Debian
MAX_POINTS = 400
FIT_COLOUR = "#d62728"


@dataclass(frozen=True)
class Line:
    xs: Sequence[float]
    ys: Sequence[float]
    colour: str
    label: str
    dashed: bool = False


@dataclass(frozen=True)
class Fit:
    """y = slope * x + intercept over [x0, x1], drawn dashed over the data."""

    slope: float
    intercept: float
    x0: float
    x1: float


def reduce(xs: Sequence[float], ys: Sequence[float], limit: int = MAX_POINTS
           ) -> tuple[list[float], list[float]]:
    """At most about `limit` points: per bucket, the lowest and highest y in x order."""
    if len(xs) <= limit:
        return list(xs), list(ys)
    size = -(-2 * len(xs) // limit)
    out_x: list[float] = []
    out_y: list[float] = []
    for start in range(0, len(xs), size):
        # min and max of a slice, then its index: C loops (a run of a us step has 10^6)
        bucket = list(ys[start:start + size])
        lo = start + bucket.index(min(bucket))
        hi = start + bucket.index(max(bucket))
        for i in sorted({lo, hi}):
            out_x.append(xs[i])
            out_y.append(ys[i])
    return out_x, out_y


def human(value: float, unit: str, span: float = 0.0) -> str:
    """A tick label in KiB/MiB/GiB or ms/us, precise enough that ticks `span` apart differ."""
    scales = {"B": (("GiB", 1024.0**3), ("MiB", 1024.0**2), ("KiB", 1024.0), ("B", 1.0)),
              "s": (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))}.get(unit)
    if scales is None:
        return f"{value:.4g}"
    name, scale = next(((n, f) for n, f in scales if abs(value) >= f), scales[-1])
    step = span / 2 / scale if span > 0 else 1.0
    decimals = min(6, max(0, 1 - math.floor(math.log10(step)))) if step < 10 else 0
    return f"{value / scale:.{decimals}f} {name}"


def robust_range(ys: Sequence[float], lo_q: float = 0.01, hi_q: float = 0.98
                 ) -> tuple[float, float]:
    """The [lo_q, hi_q] quantiles of ys widened by a quarter of their spread, so spikes
    do not flatten the plot (those left out are counted on the chart)."""
    if not ys:
        return 0.0, 1.0
    v = sorted(ys)
    lo = v[int(lo_q * (len(v) - 1))]
    hi = v[math.ceil(hi_q * (len(v) - 1))]
    spread = hi - lo or abs(hi) * 0.05 or 1.0
    low = lo - spread * 0.25
    return (max(0.0, low) if v[0] >= 0 else low), hi + spread * 0.25


@dataclass(frozen=True)
class Axes:
    """A chart's data ranges and plot area: where a value is drawn."""

    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float
    w: float = WIDTH - LEFT - RIGHT
    h: float = HEIGHT - TOP - BOTTOM

    def px(self, x: float) -> float:
        return LEFT + (x - self.x_lo) / (self.x_hi - self.x_lo) * self.w

    def py(self, y: float) -> float:
        return TOP + (1 - (y - self.y_lo) / (self.y_hi - self.y_lo)) * self.h


def chart(title: str, lines: Sequence[Line], unit: str, warmup_end: float | None = None,
          fit: Fit | None = None, note: str = "", y_range: tuple[float, float] | None = None,
          headline: str = "") -> Markup:
    """One chart: the lines against iteration, warm-up shaded, fitted slope dashed.

    `y_range` fixes the y axis (points outside it are drawn at the edge and counted);
    `headline` (the slope) is printed large, to compare across scales."""
    if any(len(ln.xs) != len(ln.ys) for ln in lines):
        raise ValueError(f"{title}: a line's xs and ys differ in length")
    drawn = [ln for ln in lines if len(ln.xs)]
    if not drawn:
        return Markup(f'<p class="noplot">{escape(title)}: no samples</p>')
    ax = axes(drawn, y_range, fit)
    clipped = [] if y_range is None else [
        p for ln in drawn for p in chain(   # C loops: a run of a us step has 10^6 points
            compress(zip(ln.xs, ln.ys, strict=True), map(float(ax.y_hi).__lt__, ln.ys)),
            compress(zip(ln.xs, ln.ys, strict=True), map(float(ax.y_lo).__gt__, ln.ys)))]
    parts = [*frame(title, ax), *warmup(ax, warmup_end), *ticks(ax, unit),
             *series(lines, ax), *legend(lines),
             *clipped_note(clipped, ax, warmup_end, unit, note),
             *fit_line(fit, ax), *labels(title, headline, note, ax)]
    return Markup("".join(parts))


def axes(lines: Sequence[Line], y_range: tuple[float, float] | None, fit: Fit | None
         ) -> Axes:
    """The ranges: x from 0, y as `y_range` fixes it, else the data and fit padded 5 %.
    Each line has a point."""
    x_lo = min(0.0, *(min(ln.xs) for ln in lines))
    x_hi = max(max(ln.xs) for ln in lines)
    if y_range is not None:
        y_lo, y_hi = y_range
    else:
        y_lo = min(min(ln.ys) for ln in lines)
        y_hi = max(max(ln.ys) for ln in lines)
        if fit is not None:
            for x in (fit.x0, fit.x1):
                y = fit.slope * x + fit.intercept
                y_lo, y_hi = min(y_lo, y), max(y_hi, y)
    if y_hi - y_lo < 1e-12 * max(1.0, abs(y_hi)):
        y_lo, y_hi = y_lo - 1, y_hi + 1
    if y_range is None:
        pad = (y_hi - y_lo) * 0.05
        y_lo, y_hi = y_lo - pad, y_hi + pad
    return Axes(x_lo, x_hi if x_hi > x_lo else x_lo + 1, y_lo, y_hi)


def frame(title: str, ax: Axes) -> list[str]:
    """The svg element and the plot area's white box."""
    return [f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" width="{WIDTH}" '
            f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
            f'aria-label="{escape(title)}">',
            f'<title>{escape(title)}</title>',
            f'<rect x="{LEFT}" y="{TOP}" width="{ax.w}" height="{ax.h}" fill="#fff" '
            'stroke="#bbb"/>']


def warmup(ax: Axes, warmup_end: float | None) -> list[str]:
    """The warm-up shaded, with its label."""
    if warmup_end is None or warmup_end <= ax.x_lo:
        return []
    end = ax.px(min(warmup_end, ax.x_hi))
    return [f'<rect class="warmup" x="{LEFT}" y="{TOP}" width="{end - LEFT:.1f}" '
            f'height="{ax.h}" fill="#e8e8e8"><title>warm-up (iterations up to '
            f'{warmup_end:.0f})</title></rect>',
            f'<text x="{LEFT + 3}" y="{TOP + ax.h - 4}" font-size="9" '
            'fill="#777">warm-up</text>']


def ticks(ax: Axes, unit: str) -> list[str]:
    """Three labels on each axis: low, middle, high."""
    parts = []
    for frac in (0.0, 0.5, 1.0):
        y = ax.y_lo + frac * (ax.y_hi - ax.y_lo)
        parts.append(f'<text x="{LEFT - 4}" y="{ax.py(y) + 3:.1f}" font-size="9" '
                     f'text-anchor="end" fill="#444">'
                     f'{escape(human(y, unit, ax.y_hi - ax.y_lo))}</text>')
        x = ax.x_lo + frac * (ax.x_hi - ax.x_lo)
        parts.append(f'<text x="{ax.px(x):.1f}" y="{HEIGHT - 8}" font-size="9" '
                     f'text-anchor="middle" fill="#444">{x:.0f}</text>')
    return parts


def series(lines: Sequence[Line], ax: Axes) -> list[str]:
    """Each line as a polyline (reduced), a point off the y axis drawn on its edge."""
    parts = []
    x_lo, y_lo, y_hi, w, h = ax.x_lo, ax.y_lo, ax.y_hi, ax.w, ax.h
    dx, dy = ax.x_hi - x_lo, y_hi - y_lo
    for ln in lines:
        xs, ys = reduce(ln.xs, ln.ys)
        # px and py inlined: large pages draw hundreds of thousands of points.
        path = " ".join(
            f"{LEFT + (x - x_lo) / dx * w:.1f},"
            f"{TOP + (1 - ((y_lo if y < y_lo else y_hi if y > y_hi else y) - y_lo) / dy) * h:.1f}"
            for x, y in zip(xs, ys, strict=True))
        dash = ' stroke-dasharray="3,2"' if ln.dashed else ""
        parts.append(f'<polyline class="series" fill="none" stroke="{escape(ln.colour)}" '
                     f'stroke-width="1.2"{dash} points="{path}"><title>{escape(ln.label)}'
                     '</title></polyline>')
    return parts


def legend(lines: Sequence[Line]) -> list[str]:
    """The lines' names in their colours where there are several, under the axis."""
    if len(lines) <= 1:
        return []
    said = " · ".join(ln.label for ln in lines)
    return [f'<text class="legend" x="2" y="{HEIGHT - 0.5}" font-size="8" fill="#555">'
            + "".join(f'<tspan fill="{escape(ln.colour)}">{escape(ln.label)}'
                      f'{" · " if k < len(lines) - 1 else ""}</tspan>'
                      for k, ln in enumerate(lines))
            + f'<title>{escape(said)}</title></text>']


def clipped_note(clipped: Sequence[tuple[float, float]], ax: Axes, warmup_end: float | None,
                 unit: str, beside: str = "") -> list[str]:
    """How many points lie off the axis, how far, and whether warm-up, above the plot; the
    how far only in its title where the line would run into `beside`, the note drawn at
    its right end (`labels`)."""
    whole, short = [], []
    for side, off in (("above", [p for p in clipped if p[1] > ax.y_hi]),
                      ("below", [p for p in clipped if p[1] < ax.y_lo])):
        if not off:
            continue
        warm = sum(1 for x, _ in off if warmup_end is not None and x <= warmup_end)
        far = max(y for _, y in off) if side == "above" else min(y for _, y in off)
        short.append(f"{len(off)}{' warm-up' if warm == len(off) else ''} {side}")
        whole.append(f"{short[-1]} ({'max' if side == 'above' else 'min'} "
                     f"{human(far, unit, 0)})")
    if not whole:
        return []
    said = "; ".join(whole)
    fits = SMALL_CHAR_PX * (len(said) + (len(beside) + 2 if beside else 0)) <= ax.w
    return [f'<text class="clipped" x="{LEFT}" y="{TOP - 4}" font-size="8" '
            f'fill="#a40">{escape(said if fits else "; ".join(short))}<title>'
            f'{escape(said)}: samples off the axis, drawn on its edge</title></text>']


def fit_line(fit: Fit | None, ax: Axes) -> list[str]:
    """The fitted slope, dashed."""
    if fit is None:
        return []
    return [f'<line class="fit" x1="{ax.px(fit.x0):.1f}" '
            f'y1="{ax.py(fit.slope * fit.x0 + fit.intercept):.1f}" '
            f'x2="{ax.px(fit.x1):.1f}" y2="{ax.py(fit.slope * fit.x1 + fit.intercept):.1f}" '
            f'stroke="{FIT_COLOUR}" stroke-width="1.5" stroke-dasharray="5,3">'
            '<title>fitted slope (Theil-Sen, after warm-up)</title></line>']


def labels(title: str, headline: str, note: str, ax: Axes) -> list[str]:
    """The title, the headline, the note, the x axis's name; closes the svg."""
    parts = [f'<text x="{LEFT}" y="{TOP - 17}" font-size="11" font-weight="bold" '
             f'fill="#222">{escape(title)}</text>']
    if headline:
        parts.append(f'<text class="headline" x="{WIDTH - RIGHT}" y="{TOP - 16}" '
                     f'font-size="12" font-weight="bold" text-anchor="end" fill="#222">'
                     f'{escape(headline)}</text>')
    if note:
        parts.append(f'<text class="note" x="{WIDTH - RIGHT}" y="{TOP - 4}" font-size="8" '
                     f'text-anchor="end" fill="#555">{escape(note)}</text>')
    parts.append(f'<text x="{LEFT + ax.w / 2:.0f}" y="{HEIGHT - 0.5}" font-size="8" '
                 'text-anchor="middle" fill="#777">iteration</text></svg>')
    return parts
