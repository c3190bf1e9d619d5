"""report.html: one self-contained page, plots drawn as inline SVG (works offline).

The Jinja2 templates ship as package data (`harness/report/templates/`) and are
autoescaped: scenario ids, reasons and tracebacks come from the cells and may hold
anything, `<script>` included. Only the SVG from `harness.report.svg`, which escapes
its own text, is passed as `Markup`.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, TextIO

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from harness.analysis.kinds import BAD, GOOD
from harness.ingest import Series, read_samples
from harness.report.model import Report, cell_numbers
from harness.report.svg import Fit, Line, chart

# sample key -> name of the trend in result["memory"] (see analysis.verdict.SOURCES)
SOURCES = (("heap", "heap"), ("uss", "uss"), ("rss", "rss"), ("cgroup", "cgroup"),
           ("gpu_used", "gpu"), ("fw", "fw"))
COLOURS = {"heap": "#1f77b4", "uss": "#2ca02c", "rss": "#9467bd", "cgroup": "#8c564b",
           "gpu": "#ff7f0e", "fw": "#17becf", "step": "#444444"}


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

    @property
    def kind(self) -> str:
        return "bad" if self.verdict in BAD else "good" if self.verdict in GOOD else "other"


def kib(value: float) -> str:
    """Bytes as signed KiB, two decimals, without a "-0.00" for tiny negative noise."""
    return f"{round(value / 1024, 2) + 0.0:+.2f}"


def warmup_end(series: Series) -> float | None:
    ends = [float(s["i"]) for s in series.samples if s.get("phase") == "warmup"]
    return max(ends) if ends else None


def memory_plot(series: Series, key: str, name: str, trend: dict[str, Any] | None) -> Markup:
    """Bytes of one source against iteration, every phase, with the fitted slope."""
    pairs = sorted((float(s["i"]), float(s[key])) for s in series.samples
                   if s.get(key) is not None)
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    fit, note = None, ""
    if trend is not None:
        slope = float(trend["slope"])
        mx, my = series.memory(key)
        if len(mx):
            # Theil-Sen's intercept: the median offset of the points from the slope.
            intercept = statistics.median(float(y) - slope * float(x)
                                          for x, y in zip(mx, my, strict=True))
            fit = Fit(slope, intercept, float(mx[0]), float(mx[-1]))
        lo, hi = trend.get("slope_lo"), trend.get("slope_hi")
        ci = f" [{kib(lo)}..{kib(hi)}]" if lo is not None and hi is not None else ""
        note = f"{kib(slope)}{ci} KiB/it, {trend.get('kind', '')}"
    line = Line(xs, ys, COLOURS.get(name, "#333"), name)
    return chart(name, [line], "B", warmup_end(series), fit, note)


def step_plot(series: Series, steps: dict[str, Any] | None) -> Markup:
    """Seconds per step against iteration, warm-up included and shaded."""
    xs: list[float] = []
    ys: list[float] = []
    for s in series.samples:
        if s.get("src") == "step":
            dt = s["dt"]
            first = int(s["i"]) - len(dt) + 1
            xs.extend(float(first + k) for k in range(len(dt)))
            ys.extend(dt)
    note = ""
    if steps:
        note = f"late/early {float(steps['ratio']):.2f}x, p={float(steps['p_value']):.2g}"
    return chart("step time", [Line(xs, ys, COLOURS["step"], "step time")], "s",
                 warmup_end(series), None, note)


def cell_view(report: Report, cid: str, role: str) -> CellView:
    res = report.results[cid]
    err = (res.get("end") or {}).get("error") or {}
    view = CellView(cid, res["image"]["label"], res["verdict"], str(res.get("reason", "")),
                    cell_numbers(res), role, traceback=str(err.get("traceback") or ""),
                    problems=[str(p) for p in res.get("problems") or []])
    path = report.samples_path(cid)
    if path is None:
        view.note = "no samples.jsonl next to this result: no plots"
        return view
    series = read_samples(path)
    memory = res.get("memory") or {}
    for key, name in SOURCES:
        if any(s.get(key) is not None for s in series.samples):
            view.plots.append(memory_plot(series, key, name, memory.get(name)))
    if series.step_times().size or any(s.get("src") == "step" for s in series.samples):
        view.plots.append(step_plot(series, res.get("steps")))
    if not view.plots:
        view.note = "samples.jsonl holds no samples"
    return view


def environment() -> Environment:
    """The template environment: package data, autoescape on, undefined names fail."""
    return Environment(loader=PackageLoader("harness.report", "templates"),
                       autoescape=select_autoescape(default=True, default_for_string=True),
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


class HtmlReporter:
    """report.html from a Report (with `root` set, to plot each cell's samples)."""

    def __init__(self, report: Report):
        self.report = report

    @classmethod
    def from_results(cls, report: Report) -> HtmlReporter:
        return cls(report)

    def render(self, out: TextIO) -> None:
        r = self.report
        header, body = r.table()
        views: dict[str, CellView] = {}
        for row in r.rows:
            for label, _, cid in row.cells:
                role = ("first-bad" if label == row.first_bad else
                        "last-good" if label == row.last_good else "")
                views[cid] = cell_view(r, cid, role)
        grid = []
        for row, line in zip(r.rows, body, strict=True):
            by_image = {label: cid for label, _, cid in row.cells}
            grid.append((row, [(views.get(by_image.get(img, "")), text)
                               for img, text in zip(r.images, line[1:-1], strict=True)]))
        template = environment().get_template("report.html.j2")
        out.write(template.render(report=r, header=header, grid=grid, views=views,
                                  bad=len(r.bad_cells), meta=sorted(r.meta.items())))
