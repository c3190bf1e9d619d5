"""Issue 29: the console at 40 images x 40 rows reads in one screen: a grid of tokens
where full words do not fit, headers never broken, nothing wider than the width, the
rows' answers grouped, messages wrapped."""

from __future__ import annotations

import io
import itertools
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.analysis.records import human_seconds
from harness.report import ConsoleReporter, Report
from harness.report.grid import GLYPHS, pack, wrap
from harness.result.model import Planned
from tests.resultkit import as_results

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
TAGS = [f"{20 + k // 12}.{k % 12 + 1:02d}" for k in range(40)]     # 20.01 ... 23.04
FIRST_BAD = TAGS[26]      # 22.03
ROWS = [f"gpu{g}.scenario{s:02d}" for g in range(4) for s in range(10)]
LONG_REASON = ("image not found: " + "nvcr.io/nvidia/pytorch:" * 6 + "23.04-py3 "
               "(the registry answered 404 for this tag; fix: check the tag exists, log "
               "in with docker login, or drop it from the matrix's image list)")


def cell(image: int, row: str) -> dict[str, Any]:
    tag = TAGS[image]
    out: dict[str, Any] = {"id": f"{tag}.{row}", "row": row, "verdict": "ok",
                           "image": {"label": tag, "index": image},
                           "summary": {"median_step_s": 0.0009996}}
    if row.endswith("scenario09"):                     # two kinds of rows differ
        if row.startswith("gpu3") and image == 30:
            out.update(verdict="slowdown", reason="slower",
                       steps={"n": 100, "median_s": 0.001, "early_median_s": 0.001,
                              "late_median_s": 0.0015, "ratio": 1.5, "p_value": 1e-9,
                              "slowdown": True})
        elif row.startswith("gpu2") and image == 5:
            out.update(verdict="crash", reason="RuntimeError: boom")
        return out
    if image >= 26:
        out.update(verdict="leak", carrier="heap",
                   memory={"heap": {"source": "heap", "n": 60, "slope": 16384.0,
                                    "slope_lo": 16000.0, "slope_hi": 16700.0,
                                    "growth": 1e6, "late_slope": 16384.0,
                                    "late_lo": 16000.0, "late_hi": 16700.0, "start": 0.0,
                                    "end": 1e6, "peak": 1e6, "kind": "leak"}})
    if image == 39 and row == "gpu0.scenario00":
        out.update(verdict="unavailable", reason="image not found",
                   outcome={"error": LONG_REASON})
    return out


def big_report(rows: list[str] = ROWS, images: int = 40) -> Report:
    cells = {c["id"]: c for row in rows for i in range(images) for c in [cell(i, row)]
             if not (i == 3 and row == "gpu1.scenario01")}       # one cell not run
    planned = [Planned(f"{TAGS[i]}.{row}", row, TAGS[i], i) for row in rows
               for i in range(images)]
    return Report.from_results("big", as_results(cells), {}, planned=planned)


@pytest.fixture(scope="module")
def report() -> Report:
    return big_report()


def shown(report: Report, width: int, **kw: Any) -> list[str]:
    out = io.StringIO()
    ConsoleReporter.from_results(report).render(out, colour=False, width=width, **kw)
    return out.getvalue().splitlines()


def header_labels(lines: list[str]) -> list[str]:
    """Every image label on the grid's header lines ("row" first), block by block."""
    return [word for line in lines if line.startswith("row ") for word in line.split()[1:]]


@pytest.mark.parametrize("width", [80, 100, 160])
def test_grid_fits_the_width_and_never_breaks_a_header(report: Report, width: int) -> None:
    lines = shown(report, width)
    assert max(len(line) for line in lines) <= width, "\n".join(lines)
    # every image's header appears whole, once, in order, across the blocks
    assert header_labels(lines) == TAGS
    # one line per row per block: each row's name starts as many lines as there are blocks
    blocks = sum(1 for line in lines if line.startswith("row "))
    assert blocks == (1 if width >= 9 + 24 + 40 * 6 else blocks) and blocks > 1
    assert sum(1 for line in lines if line.startswith("gpu0.scenario00 ")) == blocks
    if width == 100:
        assert len(lines) <= 150, len(lines)


def test_first_bad_is_marked_in_its_row_and_the_legend_says_every_symbol(
        report: Report) -> None:
    lines = shown(report, 160)
    row = next(line for line in lines if line.startswith("gpu0.scenario01 ")
               and "[" in line)
    assert "[L16]" in row
    start = next(k for k, line in enumerate(lines) if line.startswith("legend:"))
    stop = lines.index("", start)
    legend = " ".join(lines[start:stop])
    for kind in ("ok", "leak", "slowdown", "crash", "unavailable", "not run"):
        assert f"{GLYPHS[kind].symbol} {GLYPHS[kind].word}" in legend, kind
    assert "[] first bad" in legend
    assert "P plateau" not in legend       # only the symbols the grid shows


def test_conclusions_are_grouped(report: Report) -> None:
    text = "\n".join(shown(report, 100))
    # 36 rows leak from 22.03 (one has a cell not run long before it), said once
    assert re.search(r"^36 rows: first bad: 22\.03 \(last good: 22\.02\)$", text, re.M), text
    assert text.count("first bad: 22.03 (last good: 22.02)") <= 3   # said once per group
    assert "gpu3.scenario09" in text and "gpu2.scenario09" in text  # the rows that differ


def test_full_words_only_for_bad_and_doubtful_cells_unless_details(report: Report) -> None:
    lines = shown(report, 100)
    words = lines[lines.index(next(x for x in lines if x.startswith("cells in words"))):]
    assert not any(": ok:" in x or x.strip().startswith("20.01.") for x in words)
    assert any(f"{FIRST_BAD}.gpu0.scenario01: leak: heap +16.0 KiB/call" in x for x in words)
    assert any("more: --details" in x for x in words)
    every = shown(report, 100, details=True)
    assert any(x.strip().startswith("20.01.gpu0.scenario00: ok:") for x in every)
    assert max(len(x) for x in every) <= 100


def test_messages_and_paths_wrap_at_the_width(report: Report) -> None:
    lines = shown(report, 100)
    assert max(len(x) for x in lines) <= 100
    note = " ".join(x.strip() for x in lines)
    assert "drop it from the matrix's image list" in note      # the whole reason is there
    path = "/very/long/" + "directory/" * 20 + "result.json"
    pieces = wrap(f"results: {path}", 60)
    assert all(len(p) <= 60 for p in pieces)
    assert "".join(p.strip() for p in pieces) in (f"results:{path}", f"results: {path}")


def test_small_report_keeps_the_table_in_words() -> None:
    """Four images and one row (the README's demo shape) still get today's table, images
    down at 100 columns; no grid, no legend."""
    small = big_report(["cpu.multidict_pop"], 4)
    lines = shown(small, 100)
    assert lines[0].split() == ["image", "cpu.multidict_pop"]
    assert any(line.startswith("20.01") and "ok:" in line for line in lines)
    assert not any(line.startswith("legend:") for line in lines)


def test_a_millisecond_is_not_written_1e03_microseconds() -> None:
    assert human_seconds(0.0009996) == "1 ms"
    assert human_seconds(0.0000159) == "15.9 µs"
    assert human_seconds(0.0123) == "12.3 ms"


def reported_in_pty(report: Report, root: Path, cols: int) -> tuple[list[str], Path]:
    """`harness report` of `report`'s cells, stored under `root`, run through a pty
    `cols` wide and drawn by a terminal emulator: its lines as drawn, and the run's
    directory. No line of what it
    wrote is wider than the terminal, and it exits as a bad run does (1, or 3 where it
    could not write a file)."""
    import pyte

    from harness.result.codec import encode
    from harness.result.model import Plan
    from harness.store import RunStore
    from harness.store.results import PLAN_FILE
    from tests.unit.test_terminal import ANSI as PTY_ANSI
    from tests.unit.test_terminal import in_pty

    store = RunStore.open(root / "reports", "big", False)
    try:
        for res in report.results.values():
            store.write_cell(res)
        store.write(PLAN_FILE, encode(Plan(report.planned, "m.yaml")))
    finally:
        store.unlock()
    code, out = in_pty([sys.executable, "-m", "harness", "report", str(store.root)], cols,
                       root)
    assert code in (1, 3), out[-2000:]
    screen = pyte.Screen(cols, 2000)
    pyte.ByteStream(screen).feed(out.replace("\n", "\r\n").encode("utf-8"))
    raw = PTY_ANSI.sub("", out).replace("\r", "").splitlines()
    assert max(len(line) for line in raw) <= cols
    return [line.rstrip() for line in screen.display], store.root


@pytest.mark.slow
@pytest.mark.parametrize("cols", [80, 160])
def test_grid_in_a_terminal(tmp_path_factory: pytest.TempPathFactory, cols: int) -> None:
    """Through a pty, drawn by a terminal emulator: no line wider than the terminal
    (none wrapped by it) and every header whole."""
    rows = ROWS[::5]                     # 8 rows x 40 images: a grid at both widths
    drawn, run = reported_in_pty(big_report(rows), tmp_path_factory.mktemp("grid"), cols)
    assert header_labels(drawn) == TAGS
    assert any(line.startswith("legend:") for line in drawn)
    assert Path(run, "report.html").is_file()


def test_plain_progress_lines_wrap_at_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29: a piped sweep printed 116 columns at COLUMNS=100."""
    from harness.sweeping.course import PlainProgress

    out = io.StringIO()
    monkeypatch.setenv("COLUMNS", "60")
    PlainProgress(stream=out)(f"23.04.gpu0.s00: unavailable: {LONG_REASON}")
    lines = out.getvalue().splitlines()
    assert len(lines) > 2 and max(len(x) for x in lines) <= 60
    assert lines[0].startswith("harness: 23.04.gpu0.s00: unavailable:")
    assert "drop it from the matrix's image list" in " ".join(x.strip() for x in lines)
    monkeypatch.delenv("COLUMNS")
    out = io.StringIO()
    PlainProgress(stream=out)("x " * 80)          # no width given: one line, for grep
    assert len(out.getvalue().splitlines()) == 1


def test_rows_with_one_answer_are_said_once_beside_the_table_too() -> None:
    """30 images x 6 rows at 160 columns: the table in words (images down), and the
    four rows whose first bad is the same said once, named, not four times."""
    rows = [f"gpu{g}.scenario0{s}" for g in range(2) for s in (0, 1, 9)]
    lines = shown(big_report(rows, 30), 160)
    assert lines[0].split()[0] == "image" and not any(x.startswith("legend:") for x in lines)
    text = "\n".join(lines)
    assert text.count("first bad: 22.03 (last good: 22.02)") == 1, text
    assert "4 rows: first bad: 22.03 (last good: 22.02)" in text
    assert "gpu0.scenario00, gpu0.scenario01, gpu1.scenario00, gpu1.scenario01" in text


@given(st.lists(st.text(alphabet="ab/@.-:", min_size=1, max_size=120), min_size=1,
                max_size=12), st.integers(min_value=20, max_value=160))
def test_packed_items_fit_the_width_and_keep_every_character(items: list[str],
                                                             width: int) -> None:
    """A label or path as long as the line (an `as_of` image's `aiohttp@2025-07-15`
    beside others, a result's path) never runs past the width after its indent, and
    nothing is lost or reordered."""
    out = pack(items, width)
    assert all(len(line) <= width for line in out), out
    assert "".join("".join(out).split()) == "".join(items)


@pytest.mark.parametrize("width", [80, 160])
def test_above_large_each_answer_is_a_block_of_row_patterns(
        monkeypatch: pytest.MonkeyPatch, width: int) -> None:
    """Issue 62: past `model.LARGE` cells the grid (a line per row per block of images:
    731 lines at 10,000 cells) is said as a block per answer, the rows of one pattern of
    verdicts on one line, as runs of images: one screen per answer."""
    from harness.report import model

    monkeypatch.setattr(model, "LARGE", 1000)
    report = big_report()                                   # 1,600 cells
    lines = shown(report, width)
    text = "\n".join(lines)
    assert max(len(line) for line in lines) <= width, text
    assert not any(line.startswith("row ") for line in lines)   # no grid
    blocks = text.split("\n\n")
    # the largest answer first, its rows named, then its patterns: 34 rows alike on one
    # line; the row with an unavailable last image and the one with a cell not run
    # each on its own, their runs broken where they differ
    first = blocks[0]
    assert first.startswith("36 rows: first bad: 22.03 (last good: 22.02)")
    said = " ".join(first.split())       # its lines unwrapped
    assert (" gpu0.scenario01 … gpu3.scenario08 (34 rows): 20.01-22.02 ·x26, [22.03 L16], "
            "22.04-23.04 L16x13 ") in said
    assert (" gpu0.scenario00: 20.01-22.02 ·x26, [22.03 L16], 22.04-23.03 L16x12, "
            "23.04 U ") in said
    assert (" gpu1.scenario01: 20.01-20.03 ·x3, 20.04 -, 20.05-22.02 ·x22, [22.03 L16], "
            "22.04-23.04 L16x13") in said
    # every other answer a block of its own, its first bad bracketed
    assert any(b.startswith("gpu3.scenario09: first bad: 22.07") and "[22.07 S1.5]" in b
               for b in blocks)
    assert any(b.startswith("2 rows: no bad image") and "all 2 rows: 20.01-23.04 ·x40" in b
               for b in blocks)
    # each answer's block fits a screen; the answers are not said a second time
    answers = [b for b in blocks if re.match(r"(\d+ rows|gpu\S+): (first bad|no bad)", b)]
    assert len(answers) == 4 and all(len(b.split("\n")) <= 40 for b in answers)
    assert text.count("first bad: 22.03 (last good: 22.02)") == 1
    assert "legend:" in text and "[] first bad" in text


def test_at_most_large_the_grid_is_kept() -> None:
    from harness.report import model

    report = big_report()
    assert not report.large and len(report.planned) <= model.LARGE
    assert any(line.startswith("row ") for line in shown(report, 100))


@pytest.mark.slow
@pytest.mark.parametrize("cols", [80, 160])
def test_a_large_run_in_a_terminal(tmp_path_factory: pytest.TempPathFactory, cols: int) -> None:
    """Issue 62, as a person sees it: `harness report` of 2,080 cells (past
    `model.LARGE`) through a pty, drawn by a terminal emulator: a block per answer, each
    row pattern a line, nothing wider than the terminal, the whole in one screen or two
    (the grid was a line per row per block of images)."""
    from harness.report import model

    rows = [*ROWS, *(f"gpu{g}.extra{s}" for g in range(4) for s in range(3))]
    large = big_report(rows)
    assert len(large.planned) > model.LARGE
    drawn, _ = reported_in_pty(large, tmp_path_factory.mktemp("large"), cols)
    while drawn and not drawn[-1]:
        drawn.pop()
    text = "\n".join(drawn)
    assert not any(line.startswith("row ") for line in drawn), text     # no grid
    assert re.search(r"^48 rows: first bad: 22\.03 \(last good: 22\.02\)$", text, re.M), text
    said = " ".join(text.split())
    assert "(46 rows): 20.01-22.02 ·x26, [22.03 L16], 22.04-23.04 L16x13" in said, text
    assert "[22.07 S1.5]" in said and any(line.startswith("legend:") for line in drawn)
    assert len(drawn) <= 2 * 40 + 20, text       # the pty is 40 lines high


@pytest.mark.parametrize("width", [60, 100])
def test_images_down_a_cell_is_one_line_where_the_width_has_room(width: int) -> None:
    """Issue 63's new-user pass: the README's demo at COLUMNS=100 (images down, one row)
    broke each cell in two ("15.9" / "µs/call") in a 56-column table, with room for
    every cell on one line; the column is as wide as its longest cell where the width
    has room, and two lines only where it has not."""
    lines = shown(big_report(["cpu.pop"], 28), width)
    assert max(len(line) for line in lines) <= width
    bad = [line for line in lines if line.startswith("22.03 ")]
    assert len(bad) == 1
    assert bad[0].split(None, 1)[1].rstrip() == "leak: heap +16.0 KiB/call, 1 ms/call"
    assert not any(line.strip().startswith("KiB/call") for line in lines)
    narrow = shown(big_report(["cpu.pop"], 28), 30)    # no room: two lines
    assert max(len(line) for line in narrow) <= 30
    assert any(line.strip() == "KiB/call, 1 ms/call" for line in narrow), narrow


def test_two_lines_never_part_a_figure_from_its_unit() -> None:
    """Issue 63's new-user pass: at 80 columns the demo's leak cells read "leak: heap
    +5.8 KiB/call, 15.9" / "µs/call, peak RSS 1.11x baseline"; the column is one wider
    and "15.9 µs/call," stays on one line (up to 12 columns wider; else the narrowest)."""
    import textwrap

    from harness.report.fitted import two_lines

    leak = "leak: heap +5.8 KiB/call, 15.9 µs/call, peak RSS 1.11x baseline"
    assert textwrap.wrap(leak, two_lines(leak)) == [
        "leak: heap +5.8 KiB/call, 15.9 µs/call,", "peak RSS 1.11x baseline"]
    ok = "ok: heap +0.0 KiB/call, no leak above 128 B/call in 300 calls, 13.5 µs/call"
    assert textwrap.wrap(ok, two_lines(ok)) == [
        "ok: heap +0.0 KiB/call, no leak above", "128 B/call in 300 calls, 13.5 µs/call"]
    assert two_lines("first bad: multidict-6.5.1 (last good: multidict-6.4.4)") == 28
    # where only a column far wider would keep them together: the narrowest
    words = "a" * 10 + " 2.5 µs" + "c" * 25 + " d"
    assert two_lines(words) == 29 and textwrap.wrap(words, 29)[0].endswith("2.5")


def demo_report() -> Report:
    """The README demo's row: four images, ok / leak / leak / ok, its cells' words as
    long as the demo's ("ok: heap +0.0 KiB/call, no leak above 128 B/call in 300
    calls, 13.4 µs/call")."""
    heap = {"source": "heap", "n": 30, "slope": 0.0, "slope_lo": 0.0, "slope_hi": 0.0,
            "growth": 0.0, "start": 0.0, "end": 0.0, "peak": 0.0, "kind": "stable",
            "missed": 128.0}
    cells = {}
    for i, bad in enumerate([False, True, True, False]):
        label = f"multidict-6.{i}.{i}"
        memory = dict(heap, slope=5939.0 if bad else 0.0, kind="leak" if bad else "stable")
        cells[f"{label}.cpu.pop"] = {
            "id": f"{label}.cpu.pop", "row": "cpu.multidict_pop",
            "verdict": "leak" if bad else "ok", "carrier": "heap",
            "image": {"label": label, "index": i}, "memory": {"heap": memory},
            "summary": {"median_step_s": 13.4e-6 + i * 1e-6, "iterations": 300}}
    return Report.from_results("demo", as_results(cells), {})


@pytest.mark.parametrize("width", range(100, 261, 8))
def test_no_width_parts_a_figure_from_its_unit_in_a_cell(width: int) -> None:
    """This pass's look at the demo in a terminal: at 160 columns (images across) a
    cell read "in 300 calls, 13.4" / "µs/call", at 120 "ok: heap +0.0" / "KiB/call";
    the images' columns are as wide as keeps each figure beside its unit, and where
    no widths do, images go down (one line a cell there)."""
    from harness.report.fitted import FIGURE_END, UNIT_START

    lines = shown(demo_report(), width)
    assert max(len(line) for line in lines) <= width, "\n".join(lines)
    head = lines[0]
    across = head.startswith("row ")
    assert across or head.startswith("image "), "\n".join(lines)
    labels = [f"multidict-6.{i}.{i}" for i in range(4)]
    if across:     # each image's column: from its header to the next one's
        starts = [head.index(label) for label in labels] + [head.index("first bad")]
        table = lines[2:lines.index("")]
        for a, b in itertools.pairwise(table):
            for lo, hi in itertools.pairwise(starts):
                end, begin = a[lo:hi].rstrip(), b[lo:hi].lstrip()
                assert not (FIGURE_END.search(end) and UNIT_START.match(begin)), \
                    "\n".join(lines)
    else:          # one line a cell
        for label in labels:
            [line] = [line for line in lines if line.startswith(label)]
            assert line.rstrip().endswith("µs/call") or "baseline" in line, "\n".join(lines)
    assert sum(line.count("µs/call") for line in lines) == 4, "\n".join(lines)


def test_the_legend_says_which_figure_follows_a_leaks_figure() -> None:
    """A leak whose interleaved rounds also confirmed it slower than the baseline shows
    `L5.8+R1.2` (the README demo's 6.5.1 in a terminal of 80 columns); the legend said
    "+S after it: late/early step time", the within-run slowdown's words, where the
    figure after `+R` is its ratio vs the baseline, as an `R` cell's own figure says."""
    report = demo_report()
    bad = next(r for r in report.results.values() if r.verdict == "leak")
    rounds = [{"index": k, "base_s": 14e-6, "other_s": 16e-6, "ratio": 1.16, "rule": "round",
               "cpu_ratio": 1.16, "speed": 1.0, "base_busy": 0.0, "other_busy": 0.0,
               "base_sm_mhz": None, "other_sm_mhz": None, "excluded": None} for k in (1, 2)]
    pooled = {"direction": "slower", "n_base": 300, "n_other": 300, "p_value": 1e-60,
              "ratio": 1.15, "rule": "pooled-slower"}
    slower = {"baseline": "multidict-6.0.0", "direction": "slower", "rule": "",
              "steps": pooled, "cpu": pooled, "confirmation": {
                  "confirmed": True, "direction": "slower", "suspected": "slower",
                  "ratio": 1.16, "lo": 1.12, "hi": 1.2, "decided_by": [1, 2],
                  "reason": "confirmed", "rule": "confirm-slower", "seconds": 1.0,
                  "rounds": rounds}}
    cells = {k: (dict(r.to_json(), vs_baseline=slower) if r is bad else r.to_json())
             for k, r in report.results.items()}
    lines = shown(Report.from_results("demo", as_results(cells), {}), 80)
    grid = "\n".join(lines)
    assert "L5.8+R1.2" in grid, grid
    legend = " ".join(line.strip() for line in lines[next(
        i for i, line in enumerate(lines) if line.startswith("legend:")):][:3])
    assert "+R after it: ratio vs baseline" in legend and "+S after it" not in legend, grid
