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
