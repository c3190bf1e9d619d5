"""report.html: plots per cell from samples.jsonl, first bad marked, offline, escaped."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
import sweepkit
from fakeruntime import Behaviour

from harness.report import HtmlReporter, Report, write_all
from harness.report.html import SMALL_CHAR_PX, Line, chart, human, reduce
from harness.store import RunStore
from tests.resultkit import as_results

XSS = "<script>alert(1)</script>"


def render(report: Report) -> str:
    out = io.StringIO()
    HtmlReporter.from_results(report).render(out)
    return out.getvalue()


def plots(page: str) -> int:
    """The cells' plots on a page (each row's two trends across images left out)."""
    return page.count("<svg") - page.count('class="trend"')


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Report, RunStore]:
    """v1 clean, v2 leaking, v3 leaking and slower: one row, real samples on disk."""
    tmp = tmp_path_factory.mktemp("html")
    run = sweepkit.swept(tmp, ["v1", "v2", "v3"], {
        "v2": Behaviour(leak_per_iter=16384),
        "v3": Behaviour(leak_per_iter=16384, step_s=0.002)},
        name="html", defaults={**sweepkit.DEFAULTS, "warmup": 30})
    return Report.from_results(run.matrix.name, run.results, {}, run.root), run.store


def test_every_cell_gets_memory_and_step_plots(swept: tuple[Report, RunStore]) -> None:
    page = render(swept[0])
    # FakeRuntime writes heap, uss and rss: three memory plots and a step-time plot per cell
    assert plots(page) == 3 * 4
    assert page.count('class="warmup"') == 3 * 4
    assert page.count('class="fit"') == 3 * 3  # every memory source has a fitted slope
    assert ">+8.00 KiB/call</text>" in page  # heap: half the leaked bytes, printed large
    assert "CI +8.00..+8.00 KiB/call, leak" in page
    assert "late/early" in page


def test_first_bad_and_last_good_are_marked(swept: tuple[Report, RunStore]) -> None:
    page = render(swept[0])
    assert re.search(r'<div class="cell first-bad" id="v2\.gpu0\.loop">', page)
    assert re.search(r'<div class="cell last-good" id="v1\.gpu0\.loop">', page)
    assert re.search(r'<td class="bad first-bad" data-key="[^"]*"><a href="#v2.gpu0.loop">',
                     page)


def test_page_is_self_contained(swept: tuple[Report, RunStore]) -> None:
    page = render(swept[0])
    # the only URL is the SVG namespace: no CDN, no stylesheet link, one inline script
    assert set(re.findall(r"https?://[^\s\"']+", page)) == {"http://www.w3.org/2000/svg"}
    assert page.count("<script") == 1 and "<script>" in page
    assert "<link" not in page and " src=" not in page


def test_write_all_writes_html_and_junit_with_plots(tmp_path: Path,
                                                    swept: tuple[Report, RunStore]) -> None:
    report, store = swept
    # GIVEN a report built without a root (as `harness sweep` builds it)
    bare = Report.from_results(report.name, report.results, report.meta)
    assert "no samples.jsonl next to this result" in render(bare)
    paths = write_all(store, bare)
    assert [p.name for p in paths] == ["results.json", "report.md", "report.html", "junit.xml"]
    assert plots(paths[2].read_text()) == 12  # write_all pointed it at the store


def hostile() -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    res: dict[str, Any] = {
        "schema": 1, "id": f"v1.gpu0.{XSS}", "row": f"gpu0.{XSS}", "verdict": "crash",
        "reason": f"RuntimeError: {XSS}", "carrier": None, "memory": {},
        "image": {"label": f"v1{XSS}", "index": 0, "ref": XSS},
        "gpu": {"value": "0", "label": "gpu0"}, "scenario": {"id": XSS},
        "summary": {}, "fingerprint": {}, "problems": [f"line 3: {XSS}"],
        "end": {"error": {"traceback": f"Traceback...\n  File \"{XSS}\"\nRuntimeError: {XSS}"}},
    }
    return {res["id"]: res}, {"matrix": XSS}


def test_everything_from_cells_is_escaped(tmp_path: Path) -> None:
    results, meta = hostile()
    cid = next(iter(results))
    cell_dir = tmp_path / "cells" / cid
    cell_dir.mkdir(parents=True)
    lines = [{"type": "header", "schema": 1}] + [
        {"type": "sample", "src": "step", "phase": "measure", "i": i, "t": i * 0.001,
         "heap": 1e6 + i, "dt": [0.001] * 5} for i in range(5, 200, 5)]
    (cell_dir / "samples.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    page = render(Report.from_results(f"sweep {XSS}", as_results(results), meta, tmp_path))
    assert XSS not in page
    assert page.count("<script") == 1   # our own filter/sort script, nothing from a cell
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 8
    assert plots(page) == 2  # the hostile cell still gets its heap and step plots


def test_reduce_keeps_spikes_and_bounds_points() -> None:
    xs = [float(i) for i in range(10_000)]
    ys = [1e9 if i == 7_777 else 0.0 for i in range(10_000)]
    rx, ry = reduce(xs, ys, 400)
    assert len(rx) <= 402 and 1e9 in ry and 7_777.0 in rx
    assert rx == sorted(rx)


def test_chart_labels() -> None:
    assert human(95.37 * 2**20, "B", 2e6) == "95.37 MiB"
    assert human(95.37 * 2**20, "B", 200) != human(95.37 * 2**20 + 100, "B", 200)
    assert human(0.00117, "s", 3e-4) == "1.17 ms"
    assert "no samples" in chart("heap", [], "B")


def test_an_off_axis_count_never_runs_into_the_note_beside_it() -> None:
    # 1 above and 2 warm-up points below a fixed axis: the whole count, how far
    # included, where the line has room; with a long note at its right end the count
    # alone, how far kept in its title (seen in a real report.html, the two overlapping)
    line = Line([0, 1, 2, 3, 4, 5], [0.5, -9e6, 2.0, 3.0, 1e7, 5.0], "#000", "rss")
    alone = chart("rss", [line], "B", warmup_end=2, y_range=(0.0, 6.0))
    crowded = chart("rss", [line], "B", warmup_end=2, y_range=(0.0, 6.0),
                    note="CI +5.83..+5.84 KiB/call, leak")
    text = re.compile(r'<text class="clipped"[^>]*>([^<]*)<title>([^<]*)</title>')
    ((shown, title),) = text.findall(alone)
    assert shown == "1 above (max 9.5 MiB); 1 warm-up below (min -8.6 MiB)", shown
    assert title.startswith(shown)
    ((shown, title),) = text.findall(crowded)
    assert shown == "1 above; 1 warm-up below", shown
    assert title.startswith("1 above (max 9.5 MiB); 1 warm-up below (min -8.6 MiB)")
    assert SMALL_CHAR_PX * (len(shown) + len("CI +5.83..+5.84 KiB/call, leak") + 2) < 260


def test_header_in_words_links_and_folded_pip_diff(swept: tuple[Report, RunStore]) -> None:
    from harness.report.html import meta_items, split_diff

    assert dict(meta_items({"started": 0, "seconds": 12.3, "baseline": None})) == {
        "started": "1970-01-01 00:00:00 UTC", "took": "12.3 s",
        "baseline": "each row's first image"}
    report, _ = swept
    page = render(Report.from_results(report.name, report.results,
                                      {"started": 1.8e9, "baseline": None}, report.root))
    assert "1.8e9" not in page and "None" not in page and "2027-01-15" in page
    assert '<a href="cells/v2.gpu0.loop/samples.jsonl">samples</a>' in page
    assert '<input id="filter"' in page and 'class="sort"' in page
    diff = [("image", "a", "b")] + [(f"pip p{i}", "1", "2") for i in range(37)]
    shown, folded = split_diff(diff, 8)
    assert shown == [("image", "a", "b")] and len(folded) == 37
    assert split_diff(diff[:5], 8) == (diff[:5], [])


def test_panels_only_for_sources_with_data() -> None:
    from harness.protocol.ingest import Series
    from harness.report.html import sources_of

    samples = [{"type": "sample", "src": "step", "phase": "measure", "i": i, "heap": 1.0,
                "rss": 2.0, "cgroup": 3.0, **({"uss": 4.0} if i < 2 else {})}
               for i in range(10)]
    series = Series(samples=samples)
    assert [n for _, n in sources_of(series, "local")] == ["heap", "rss"]
    assert [n for _, n in sources_of(series, "docker")] == ["heap", "rss", "cgroup"]
