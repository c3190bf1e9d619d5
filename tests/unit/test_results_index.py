"""Issue 62: `harness report` reads a run's cells from results.index's lines of
results.json where each cell's result.json is still the file its line was made from;
the report it makes is the one reading every result.json makes, byte for byte, and a
cell written again since, a results.json written again or a line changed in place is
read from its file."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
from pathlib import Path

import pytest
import sweepkit
from fakeruntime import Behaviour

from harness.cli.report import recorded
from harness.report import (
    ConsoleReporter,
    HtmlReporter,
    JunitReporter,
    MarkdownReporter,
    Report,
    render_text,
    results_text,
    write_all,
)
from harness.result.codec import encode
from harness.store import RunStore
from harness.store import resultsjson as index
from harness.store.results import read_cells

BEHAVES = {"v2": Behaviour(leak_per_iter=16384), "v3": Behaviour(step_s=0.002),
           "v4": Behaviour(error="ValueError: boom"), "v5": Behaviour(oom=True),
           "v6": Behaviour(rq_share=0.6)}


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sweep over the fake runtime that ended as `harness sweep` does: every report
    written, results.index with them."""
    tmp = tmp_path_factory.mktemp("indexed")
    run = sweepkit.swept(tmp, ["v1", "v2", "v3", "v4", "v5", "v6"], BEHAVES,
                         scenarios=("a.py", "b.py"), plan=True, report=True,
                         name="indexed")
    return run.root


@pytest.fixture
def run(swept: Path, tmp_path: Path) -> Path:
    """A copy of the sweep's directory (cp -a: its files' times and sizes kept), with
    its index dated ahead, so that no cell is racy and only the stamps tell a changed
    file."""
    root = tmp_path / "run"
    shutil.copytree(swept, root, symlinks=True)
    # The copy has new inodes: index it as the sweep's end did, for these files.
    report, _ = recorded(root)
    write_all(RunStore(root), report)
    later = os.stat(root / index.INDEX_FILE).st_mtime_ns + 10**10
    os.utime(root / index.INDEX_FILE, ns=(later, later))
    return root


def rendered(root: Path) -> dict[str, str]:
    """Everything `harness report DIR` writes and prints, from the cells as read."""
    report, _ = recorded(root)
    out = io.StringIO()
    ConsoleReporter.from_results(report).render(out, width=100)
    return {"console": out.getvalue(),
            "results.json": results_text(report.to_json()),
            "report.md": render_text(MarkdownReporter.from_results(report)),
            "report.html": render_text(HtmlReporter.from_results(report)),
            "junit.xml": render_text(JunitReporter.from_results(report)),
            "cells": json.dumps({k: encode(v) for k, v in report.results.items()},
                                sort_keys=True)}


def from_lines(root: Path) -> int:
    """How many cells the index would give from their lines now."""
    with index.lines_of(root) as lines:
        assert lines is not None
        return sum(lines.result(p.name, str(p / "result.json")) is not None
                   for p in (root / "cells").iterdir())


def slow(root: Path) -> dict[str, str]:
    """The same, read from every result.json: without the index."""
    (root / index.INDEX_FILE).unlink()
    return rendered(root)


def test_the_sweep_writes_an_index_of_every_cell(swept: Path) -> None:
    cells = sorted(p.name for p in (swept / "cells").iterdir())
    assert len(cells) == 12
    text = (swept / index.INDEX_FILE).read_text()
    assert sorted(json.loads(text)["cells"]) == cells


def test_read_from_the_lines_the_report_is_the_one_read_from_the_files(run: Path) -> None:
    assert from_lines(run) == 12
    fast = rendered(run)
    assert fast == slow(run)
    assert len(json.loads(fast["results.json"])["cells"]) == 12


def test_a_cell_written_again_is_read_from_its_file(run: Path) -> None:
    store = RunStore(run)
    cells = read_cells(run).results
    changed = sorted(cells)[3]
    store.write_cell(dataclasses.replace(cells[changed], reason="written again"))
    assert from_lines(run) == 11
    fast = rendered(run)
    assert "written again" in fast["report.md"] and fast == slow(run)


def test_a_results_json_written_again_leaves_the_index_unused(run: Path) -> None:
    text = (run / "results.json").read_text()
    (run / "results.json").write_text(text.replace('"name": "indexed"', '"name": "other"'))
    with index.lines_of(run) as lines:
        assert lines is None
    fast = rendered(run)
    assert fast == slow(run)


def test_a_line_changed_in_place_is_read_from_its_file(run: Path) -> None:
    """results.json edited where it stands, its size, time and inode kept: the line's
    CRC tells it."""
    path = run / "results.json"
    st = os.stat(path)
    raw = path.read_bytes()
    at = raw.index(b'"reason": "', raw.index(b'"cells": ')) + len(b'"reason": "')
    with path.open("r+b") as f:
        f.seek(at)
        f.write(b"X")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert from_lines(run) == 11
    fast = rendered(run)
    assert '"reason": "X' not in fast["results.json"] and fast == slow(run)


def test_a_cell_written_after_the_index_is_racy_and_read_from_its_file(run: Path) -> None:
    """A result.json not older than the index might have been written again in place
    within the same tick of the file system's clock: it is not read from its line."""
    cell = next(p for p in (run / "cells").iterdir())
    ahead = os.stat(run / index.INDEX_FILE).st_mtime_ns
    os.utime(cell / "result.json", ns=(ahead, ahead))   # its stamp changes too: re-index
    report, _ = recorded(run)
    write_all(RunStore(run), report)
    os.utime(run / index.INDEX_FILE, ns=(ahead, ahead))
    assert from_lines(run) == 11


def test_a_report_of_the_cells_as_read_indexes_them_again(run: Path) -> None:
    (run / index.INDEX_FILE).unlink()
    report, _ = recorded(run)
    assert isinstance(report, Report)
    write_all(RunStore(run), report)
    later = os.stat(run / index.INDEX_FILE).st_mtime_ns + 10**10
    os.utime(run / index.INDEX_FILE, ns=(later, later))
    assert from_lines(run) == 12


def test_the_sweeps_own_index_gives_the_report_of_its_files(swept: Path, tmp_path: Path
                                                             ) -> None:
    fast = rendered(swept)
    copy = tmp_path / "copy"
    shutil.copytree(swept, copy)        # new inodes: the index there stands for nothing
    with index.lines_of(copy) as lines:
        assert lines is None or from_lines(copy) == 0
    assert fast == rendered(copy)
