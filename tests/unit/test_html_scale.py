"""Issue 29 item 2: report.html at 1,600 cells is an overview that stays small (a
heatmap, each row's trend), each cell's plots on its own page; a sweep holds a bounded
number of parsed series."""

from __future__ import annotations

import dataclasses
import io
import re
from pathlib import Path

import pytest
import sweepkit
from fakeruntime import Behaviour

from harness.report import HtmlReporter, Report, write_all
from harness.result.model import CellResult, Planned
from harness.store import RunStore, SeriesCache
from harness.store.results import samples_path

TAGS = [f"{20 + k // 12}.{k % 12 + 1:02d}" for k in range(40)]
MAX_PAGE = 2 * 2**20          # the bound on the page a person opens


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, CellResult], Path]:
    """Real cells of the fake runtime: a clean, a leaking and a slower image of a row."""
    tmp = tmp_path_factory.mktemp("scale")
    run = sweepkit.swept(tmp, ["v1", "v2", "v3"], {
        "v2": Behaviour(leak_per_iter=16384), "v3": Behaviour(step_s=0.002)},
        name="scale", defaults={**sweepkit.DEFAULTS, "warmup": 30})
    return run.results, run.root


def scaled(results: dict[str, CellResult], images: int, rows: int) -> Report:
    """`rows` x `images` cells made of the measured ones: clean up to two thirds of the
    images, then the leaking one (and every seventh row the slower one)."""
    by = {r.image.label: r for r in results.values()}
    cells: dict[str, CellResult] = {}
    for k in range(rows):
        row = f"gpu{k % 4}.s{k // 4:02d}"
        for i in range(images):
            src = by["v1"] if i < images * 2 // 3 else by["v3" if k % 7 == 6 else "v2"]
            cid = f"{TAGS[i]}.{row}"
            cells[cid] = dataclasses.replace(
                src, id=cid, row=row, image=dataclasses.replace(src.image, label=TAGS[i],
                                                               index=i))
    planned = [Planned(c.id, c.row, c.image.label, c.image.index) for c in cells.values()]
    return Report.from_results("scale", cells, {}, planned=planned)


def test_page_at_1600_cells_is_an_overview_under_2_mb(
        measured: tuple[dict[str, CellResult], Path]) -> None:
    report = scaled(measured[0], 40, 40)
    assert len(report.results) == 1600
    out = io.StringIO()
    HtmlReporter.from_results(report).render(out)
    page = out.getvalue()
    assert len(page.encode()) <= MAX_PAGE, len(page.encode())
    # no cell's own plots: only each row's two trends across images
    assert page.count("<svg") == page.count('class="trend"') == 2 * 40
    # a square per cell in the heatmap, linking to the cell's own page
    heat = page[page.index('<table class="heat">'):page.index("</table>",
                                                             page.index('class="heat"'))]
    links = re.findall(r'<a href="cells/([^"/]+)/cell\.html"></a>', heat)
    assert sorted(links) == sorted(report.results)
    firsts = [r for r in report.rows if r.first_bad]
    assert heat.count(" first-bad") == len(firsts) == 40
    # each row's trend marks its first bad image
    assert page.count('class="fb"') == 2 * 40


def test_cell_pages_are_written_once_per_change(
        measured: tuple[dict[str, CellResult], Path], tmp_path: Path) -> None:
    """Above the inline limit each cell's plots go to cells/<id>/cell.html; a second
    write leaves unchanged cells' pages alone."""
    results, root = measured
    report = scaled(results, 21, 3)               # 63 cells: above the inline limit
    src = {r.image.label: r.id for r in results.values()}
    store = RunStore.open(tmp_path / "reports", "scale", False)
    try:
        for cid, res in report.results.items():
            store.write_cell(res)
            origin = src["v1"] if res.image.index < 14 else src["v2"]
            Path(samples_path(store.root, cid)).write_bytes(
                samples_path(root, origin).read_bytes())
        write_all(store, report)
        page = samples_path(store.root, "20.01.gpu0.s00").with_name("cell.html")
        text = page.read_text()
        assert text.count("<svg") == 4         # heap, uss, rss and step time
        assert 'href="../../report.html#row-gpu0.s00"' in text
        before = page.stat().st_mtime_ns
        page.write_text("kept")                 # as if an older page: not stale
        written = HtmlReporter.from_results(
            dataclasses.replace(report, root=store.root,
                                series=SeriesCache(store.root))).write_cells(store.root)
        assert written == [] and page.read_text() == "kept" and before
    finally:
        store.unlock()


def test_series_cache_holds_a_bounded_number(
        measured: tuple[dict[str, CellResult], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    results, root = measured
    monkeypatch.setattr(SeriesCache, "KEEP", 2)
    cache = SeriesCache(root)
    ids = sorted(results)
    first = cache(ids[0])
    assert first is not None
    for cid in ids:
        series = cache(cid)
        assert series is not None
        cache.keep(cid, series)
    assert len(cache) == 2
    again = cache(ids[0])                         # let go, read back from disk
    assert again is not None and again.samples == first.samples
    assert len(SeriesCache(None, {c: first for c in ids})) == 3   # nothing to read back


def test_above_large_the_page_leads_with_each_rows_first_bad(
        measured: tuple[dict[str, CellResult], Path], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """Issue 62: past `model.LARGE` cells (10,000: a 6.7 MB page), report.html leads with
    each row's first bad and last good, rows of one answer grouped, the largest group
    first; the words of every cell and a page for each are left to report.md and
    results.json, but for the cells a reader is led to."""
    from harness.report import model

    monkeypatch.setattr(model, "LARGE", 100)
    report = scaled(measured[0], 21, 8)            # 168 cells: past the bound
    assert report.large
    html = HtmlReporter.from_results(report)
    out = io.StringIO()
    html.render(out)
    page = out.getvalue()
    heat_at = page.index('<table class="heat">')
    assert page.index("first bad of each row") < heat_at
    assert "cells in words" not in page            # no table of every cell's words
    groups = re.findall(r'<details class="leads"[^>]*><summary><b>(\d+) rows?</b>: '
                        r'([^<]*)</summary>', page[:heat_at])
    answers: dict[tuple[str, tuple[tuple[str, str, str], ...]], list[str]] = {}
    for row in report.rows:         # an answer: the first bad and what changed there
        answers.setdefault((row.sentence, tuple(row.diff)), []).append(row.row)
    assert len(answers) > 1
    assert sorted((int(n), said) for n, said in groups) == sorted(
        (len(rows), said) for (said, _), rows in answers.items())
    assert [int(n) for n, _ in groups] == sorted((int(n) for n, _ in groups), reverse=True)
    # the cells linked to a page: each row's first bad and last good (none is in doubt)
    led = {cid for row in report.rows for label, _, cid in row.cells
           if label in (row.first_bad, row.last_good)}
    assert led and html.paged() == led
    heat = page[heat_at:page.index("</table>", heat_at)]
    assert set(re.findall(r'<a href="cells/([^"/]+)/cell\.html"></a>', heat)) == led
    for cid in led:                                # each named at the top, linked
        assert f'href="cells/{cid}/cell.html">' in page[:heat_at]
    # rows of one answer folded together below; each row still has its section
    assert page.count('<details class="group">') == sum(
        1 for rows in answers.values() if len(rows) > 1)
    assert all(f'id="row-{row.row}"' in page for row in report.rows)
    # and only their pages are written
    for cid in report.results:
        (tmp_path / "cells" / cid).mkdir(parents=True)
    written = HtmlReporter.from_results(
        dataclasses.replace(report, root=tmp_path, series=SeriesCache(tmp_path))
    ).write_cells(tmp_path)
    assert {p.parent.name for p in written} == led


def test_a_trend_of_many_images_names_only_its_first_bad_on_hover() -> None:
    """A title on every point of a 100-image trend took 130 bytes a point; past
    `html.TITLED` points each is a dot in one path per colour, the first bad titled."""
    from harness.report.html import TITLED, Point, trend_chart

    labels = [f"v{i}" for i in range(100)]
    points = [Point(float(i), float(i), float(i), "ok" if i < 70 else "leak")
              for i in range(100)]
    many = str(trend_chart("t", labels, points, 70, str))
    assert re.findall(r"<title>([^<:]*):", many) == ["v70"]
    dots = re.findall(r'<path class="dots" d="([^"]*)" stroke="([^"]*)"', many)
    assert sum(d.count("h0") for d, _ in dots) == 99 and len({c for _, c in dots}) == 2
    few = str(trend_chart("t", labels[:TITLED], points[:TITLED], None, str))
    assert few.count("<title>") == TITLED and 'class="dots"' not in few


def test_a_clean_rows_memory_trend_has_two_axis_labels_that_differ() -> None:
    """Issue 63's new-user pass: report.html of a clean row (growth a few bytes either
    side of 0) labelled its memory axis "+0.00 KiB" at the top and at the bottom; below
    1 KiB a growth is said in bytes, a leak's still in KiB."""
    from harness.report.html import Point, growth_label, growth_labels, trend_chart

    labels = ["a", "b", "c"]
    clean = [Point(v / 1024, (v - 2) / 1024, (v + 2) / 1024, "ok") for v in (0.1, 0.4, 0.3)]
    svg = str(trend_chart("memory", labels, clean, None, growth_label))
    axis = re.findall(r'class="a" text-anchor="end"[^>]*>([^<]*)</text>', svg)
    assert axis == ["+2.4 B", "-1.9 B"], axis
    assert growth_label(5.85) == "+5.85 KiB" and growth_label(-0.5) == "-512.0 B"
    # a row leaking 2.09 KiB/call in every image read "+2.09 KiB" at both ends
    leaks = [Point(v, v - 0.003, v + 0.003, "leak") for v in (2.0891, 2.0903, 2.0899)]
    svg = str(trend_chart("memory", labels, leaks, 0, growth_labels(leaks)))
    axis = re.findall(r'class="a" text-anchor="end"[^>]*>([^<]*)</text>', svg)
    assert axis == ["+2.093 KiB", "+2.086 KiB"], axis


def test_the_bad_rows_sections_come_before_the_clean_ones(tmp_path: Path) -> None:
    """Issue 63's new-user pass: below the table, report.html showed each row's section
    in row order; a clean row named first (`cpu.clean`) put its plots and three cards
    above the leaking rows'. Rows with a bad cell come first, the clean ones after,
    each group in table order (the table and heatmap keep row order)."""
    from harness.report.model import Report

    run = sweepkit.swept(tmp_path, ["v1", "v2"], lambda c: Behaviour(leak_per_iter=16384)
                         if c.image.label == "v2" and c.scenario.id != "aclean"
                         else Behaviour(),
                         [{"script": "loop.py", "id": "aclean"},
                          {"script": "loop.py", "id": "mleak"},
                          {"script": "loop.py", "id": "zleak"}], report=True)
    report = Report.from_results("order", run.results, {}, root=run.root)
    out = io.StringIO()
    HtmlReporter.from_results(report).render(out)
    page = out.getvalue()
    sections = re.findall(r'<section class="row" id="row-([^"]+)">', page)
    assert sections == ["gpu0.mleak", "gpu0.zleak", "gpu0.aclean"], sections
    heat = page[page.index('<table class="heat">'):]
    assert heat.index("gpu0.aclean") < heat.index("gpu0.mleak")    # the table: row order


def test_a_cards_figures_do_not_repeat_what_its_reason_says(tmp_path: Path) -> None:
    """Issue 63's new-user pass: an ok card read "memory stable, no slowdown; no leak
    above 128 B/call in 300 calls (heap +0.0 KiB/call, no leak above 128 B/call in 300
    calls, 4.11 µs/call)"; the brackets keep only what the reason does not say."""
    from harness.report.html import cell_view, unsaid
    from harness.report.model import Report

    assert unsaid("heap +0.0 KiB/call, no leak above 128 B/call in 300 calls, 4.11 µs/call",
                  "memory stable, no slowdown; no leak above 128 B/call in 300 calls"
                  ) == "heap +0.0 KiB/call, 4.11 µs/call"
    run = sweepkit.swept(tmp_path, ["v1"], None)
    report = Report.from_results("cards", run.results, {}, root=run.root)
    [cid] = report.results
    view = cell_view(report, cid, "")
    words = [w.strip() for w in view.numbers.split(", ")]
    assert words and not any(w in view.reason for w in words), (view.reason, view.numbers)
    assert report.numbers_of(cid).count("no leak above") == 1       # the table keeps it


def test_a_step_time_trend_draws_single_runs_3_percent_apart_as_3_percent() -> None:
    """Issue 85 item 2: a one-run difference is never drawn as a change. Two clean
    images' single runs, 29.1 and 30.1 us a call, drew from the plot's bottom to its top
    (the axis from 27.6 to 30.1 us); the step-time trend's axis starts at 0."""
    from harness.report.html import TREND_HEIGHT, Point, trend_chart

    points = [Point(29.1e-6, 27.6e-6, 29.1e-6, "ok"), Point(30.1e-6, 27.9e-6, 30.1e-6, "ok")]
    svg = str(trend_chart("step time", ["a", "b"], points, None, lambda v: f"{v * 1e6:.1f} us",
                          zero=True))
    ys = [float(y) for y in re.findall(r'<circle cx="[^"]*" cy="([^"]*)"', svg)]
    assert len(ys) == 2 and abs(ys[0] - ys[1]) < 0.06 * TREND_HEIGHT, ys
    axis = re.findall(r'class="a" text-anchor="end"[^>]*>([^<]*)</text>', svg)
    assert axis == ["30.1 us", "0.0 us"], axis
