"""`harness explain`'s plan over a fake runtime (tests/fakeruntime.py writes the agent's
where record itself): which cells run again with attribution, with which kinds and how
long, what cells/<id>/where.json says, and that the sweep's verdicts stay as they were.
The real agent's runs are tests/unit/test_explain.py."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
import sweepkit
from fakeruntime import LEAK_LINE, Behaviour, FakeRuntime

from harness import matrixfile
from harness.answers.search import Pair, pairs, unpaired
from harness.explain import explain_matrix, kinds_for
from harness.matrixfile.model import DEFAULT_BUDGET_S
from harness.report import Report, render_text, write_all
from harness.report.issue import IssueReporter
from harness.result.model import CellResult
from harness.stages.orchestrator import Sweep
from harness.store import RunStore
from harness.sweeping.course import plan_of

SCENARIO = """def setup(params):
    return {"kept": []}


def step(state):
    state["kept"].append(lib.pop())   # LEAK_LINE
"""
IMAGES = ["v1", "v2", "v3", "v4", "v5"]


def behaviour(cell: matrixfile.Cell) -> Behaviour:
    """loop.py leaks from v3 on; slow.py slows from v4 on."""
    index = IMAGES.index(cell.image.label)
    if cell.scenario.id == "loop":
        return Behaviour(leak_per_iter=16384) if index >= 2 else Behaviour()
    return Behaviour(slowdown_per_iter=2e-5) if index >= 3 else Behaviour()


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory
          ) -> tuple[matrixfile.Matrix, RunStore, dict[str, CellResult]]:
    assert SCENARIO.splitlines()[LEAK_LINE - 1].endswith("# LEAK_LINE")
    run = sweepkit.swept(tmp_path_factory.mktemp("plan"), IMAGES, behaviour,
                         ["loop.py", "slow.py"], name="plan",
                         # a repeat: a slowdown a second run reads too stands
                         defaults={**sweepkit.DEFAULTS, "iterations": 600, "repeats": 1},
                         files={"loop.py": SCENARIO, "slow.py": SCENARIO})
    return run.matrix, run.store, run.results


def test_each_rows_first_bad_is_paired_with_its_last_good(
        swept: tuple[matrixfile.Matrix, RunStore, dict[str, CellResult]]) -> None:
    _, _, results = swept
    assert {cid: str(r.verdict) for cid, r in results.items() if r.row == "gpu0.loop"} == {
        "v1.gpu0.loop": "ok", "v2.gpu0.loop": "ok", "v3.gpu0.loop": "leak",
        "v4.gpu0.loop": "leak", "v5.gpu0.loop": "leak"}
    assert str(results["v4.gpu0.slow"].verdict) == "slowdown"
    assert pairs(results) == [Pair("v3.gpu0.loop", "v2.gpu0.loop", "gpu0.loop"),
                              Pair("v4.gpu0.slow", "v3.gpu0.slow", "gpu0.slow")]
    assert kinds_for(results["v3.gpu0.loop"]) == ("heap", "device")
    assert kinds_for(results["v4.gpu0.slow"])[:2] == ("stack", "ops")
    # One cell by id: the first bad with its last good; any other cell alone.
    assert pairs(results, "v3.gpu0.loop") == [Pair("v3.gpu0.loop", "v2.gpu0.loop",
                                                   "gpu0.loop")]
    assert pairs(results, "v5.gpu0.loop") == [Pair("v5.gpu0.loop", None, "gpu0.loop")]


def test_bad_from_the_first_image_is_paired_with_a_later_one_clean_on_time_alone(
        swept: tuple[matrixfile.Matrix, RunStore, dict[str, CellResult]]) -> None:
    """A CI on its own machine (stop 96): `--explain` of examples/ujson.yaml at `rounds: 0`
    read 5.12.1, the release that fixed 5.12.0's leak, `suspected` (pooled time 1.55x, no
    rounds to confirm it) with its heap flat; it was not taken as free of the leak, so
    5.12.0 had no release to be matched with. A pooled time suspicion says nothing of
    memory."""
    _, _, results = swept
    row = {cid: results[cid] for cid in ("v3.gpu0.loop", "v4.gpu0.loop")}
    row["v4.gpu0.loop"] = dataclasses.replace(
        results["v4.gpu0.loop"], verdict="suspected", rule="suspected",
        memory=results["v2.gpu0.loop"].memory)
    assert pairs(row) == [Pair("v3.gpu0.loop", "v4.gpu0.loop", "gpu0.loop")]
    # AND one whose memory did not read clean is no match
    row["v4.gpu0.loop"] = dataclasses.replace(row["v4.gpu0.loop"],
                                              memory=results["v4.gpu0.loop"].memory)
    assert pairs(row) == [Pair("v3.gpu0.loop", None, "gpu0.loop")]


def test_never_paired_across_a_missing_or_undecided_cell(
        swept: tuple[matrixfile.Matrix, RunStore, dict[str, CellResult]]) -> None:
    matrix, _, results = swept
    planned = plan_of(list(matrix.cells))
    # v2's result gone (an interrupted sweep): v1 good, v3 bad, but the first bad may be
    # v2; nothing is explained in that row.
    gone = {cid: r for cid, r in results.items() if cid != "v2.gpu0.loop"}
    assert [p.cell for p in pairs(gone, planned=planned)] == ["v4.gpu0.slow"]
    # v2 undecided: the same.
    undecided = dict(results)
    undecided["v2.gpu0.loop"] = dataclasses.replace(results["v2.gpu0.loop"],
                                                    verdict="ambiguous")
    assert [p.cell for p in pairs(undecided, planned=planned)] == ["v4.gpu0.slow"]
    assert unpaired(undecided, planned) == [
        "gpu0.loop: v2 ambiguous: first bad is v2 or later, up to v3; not explained (name a "
        "CELL to explain it alone)"]
    assert unpaired(results, planned) == []


def test_explain_runs_the_pairs_with_attribution_and_writes_where(
        swept: tuple[matrixfile.Matrix, RunStore, dict[str, CellResult]]) -> None:
    matrix, store, results = swept
    root = store.root
    before = {p: p.read_bytes() for p in root.glob("cells/*/result.json")}
    runtime = FakeRuntime(behaviour)
    said: list[str] = []
    store.lock()
    try:
        explained = explain_matrix(Sweep(matrix, runtime, store, said.append).ctx, matrix,
                                   results, pairs(results), root)
    finally:
        store.unlock()
    # THEN only the two pairs' cells ran, each once, with the kinds its verdict calls
    # for, into explain/<cell>/: memory at a fixed length, time for the default budget
    # (no early stop either way)
    assert sorted(runtime.runs) == sorted(["v3.gpu0.loop", "v2.gpu0.loop",
                                           "v4.gpu0.slow", "v3.gpu0.slow"])
    by_cell = {cid: (kinds, n, cap) for cid, kinds, n, cap in runtime.attributed}
    assert by_cell["v3.gpu0.loop"] == by_cell["v2.gpu0.loop"] == (("heap", "device"), 300,
                                                                   None)
    assert by_cell["v4.gpu0.slow"][0] == kinds_for(results["v4.gpu0.slow"])
    assert by_cell["v4.gpu0.slow"][1:] == (round(DEFAULT_BUDGET_S / Behaviour().step_s),
                                           DEFAULT_BUDGET_S)
    assert (root / "explain" / "v3.gpu0.loop" / "samples.jsonl").is_file()
    assert any("explain v3.gpu0.loop: running with --attribute heap,device" in s
               for s in said), said
    # where.json: the leak named per call at the scenario's line, absent in the good
    # image (the library's own line differs between images and is not matched on)
    assert set(explained) == {"v3.gpu0.loop", "v2.gpu0.loop", "v4.gpu0.slow", "v3.gpu0.slow"}
    bad = json.loads((root / "cells" / "v3.gpu0.loop" / "where.json").read_text())
    assert bad["role"] == "first bad" and bad["paired"] == "v2.gpu0.loop"
    assert bad["diff"] == [f"heap: +16.0 KiB/call at loop.py:{LEAK_LINE} step "
                           "(state[\"kept\"].append(lib.pop()) # LEAK_LINE) -> demo pop "
                           "in v3; 0 in v2"]
    assert bad["record"]["heap"]["sites"][0]["size"] == 16384 * 300
    good = json.loads((root / "cells" / "v2.gpu0.loop" / "where.json").read_text())
    assert good["role"] == "last good" and good["diff"] == []
    assert good["summary"] == ["heap: no site grew over 300 calls"]
    slow = json.loads((root / "cells" / "v4.gpu0.slow" / "where.json").read_text())
    assert slow["diff"] == ["time: 100% of late samples in slow.py:9 growing in v4 "
                            "(early 10%); 10% in v3"], slow
    # The sweep's verdicts are not taken from these runs.
    assert {p: p.read_bytes() for p in root.glob("cells/*/result.json")} == before


def test_a_resumed_explain_reuses_the_attributed_runs_that_finished(
        swept: tuple[matrixfile.Matrix, RunStore, dict[str, CellResult]]) -> None:
    """Issue 87 item 3: `--find-cause --resume` after a Ctrl-C between a pair's two
    attributed runs ran the finished one again; each finished run is now kept with its
    run key (explain/<cell>/attributed.json) and reused while the key holds."""
    matrix, store, results = swept
    root = store.root

    def explain_again() -> tuple[FakeRuntime, list[str]]:
        runtime, said = FakeRuntime(behaviour), []
        store.lock()
        try:
            explain_matrix(Sweep(matrix, runtime, store, said.append).ctx, matrix, results,
                           [Pair("v3.gpu0.loop", "v2.gpu0.loop", "gpu0.loop")], root)
        finally:
            store.unlock()
        return runtime, said

    explain_again()
    first = (root / "cells" / "v3.gpu0.loop" / "where.json").read_text()
    # GIVEN the pair's bad cell's run finished and its good cell's did not (its kept
    # run gone, as a Ctrl-C during it leaves it), and neither where.json was written
    (root / "explain" / "v2.gpu0.loop" / "attributed.json").unlink()
    for cid in ("v3.gpu0.loop", "v2.gpu0.loop"):
        (root / "cells" / cid / "where.json").unlink()
    # WHEN explained again THEN only the unfinished one runs, and the answer is the same
    runtime, said = explain_again()
    assert runtime.runs == ["v2.gpu0.loop"], runtime.runs
    assert any("explain v3.gpu0.loop: its attributed run in v3.gpu0.loop holds (same run "
               "key); reused" in s for s in said), said
    assert (root / "cells" / "v3.gpu0.loop" / "where.json").read_text() == first


def test_the_reports_show_the_diff(
        swept: tuple[matrixfile.Matrix, RunStore, dict[str, CellResult]]) -> None:
    """report.html: under the first bad cell's plots, a table of its sites against the
    last good cell's; report.md and the issue draft say it in words."""
    matrix, store, results = swept
    store.lock()
    try:
        explain_matrix(Sweep(matrix, FakeRuntime(behaviour), store, lambda _: None).ctx, matrix,
                       results, [Pair("v3.gpu0.loop", "v2.gpu0.loop", "gpu0.loop")],
                       store.root)
        write_all(store, Report.from_results(matrix.name, results, None, store.root))
    finally:
        store.unlock()
    html = (store.root / "report.html").read_text()
    cell = html[html.index('id="v3.gpu0.loop"'):]
    cell = cell[:cell.index('<div class="cell')] if '<div class="cell' in cell else cell
    assert cell.index('class="plots"') < cell.index('<table class="sites">'), cell
    assert ("<tr><th></th><th>site</th><th>v3 (bad)</th><th>v2</th></tr><tr><td>heap</td>"
            f'<td class="site">loop.py:{LEAK_LINE} step') in cell
    assert "<td>+16.0 KiB/call</td><td>0</td></tr>" in cell
    md = (store.root / "report.md").read_text()
    assert f"- heap: +16.0 KiB/call at loop.py:{LEAK_LINE} step" in md
    issue = render_text(IssueReporter.from_results(
        Report.from_results(matrix.name, results, None, store.root), "gpu0.loop"))
    assert "## Where" in issue and "in v3; 0 in v2" in issue


def test_a_failed_attributed_run_leaves_no_older_answer_behind(
        swept: tuple[matrixfile.Matrix, RunStore, dict[str, CellResult]]) -> None:
    matrix, store, results = swept
    pair = [Pair("v4.gpu0.slow", "v3.gpu0.slow", "gpu0.slow")]
    old = store.root / "cells" / "v4.gpu0.slow" / "where.json"
    store.lock()
    try:
        explain_matrix(Sweep(matrix, FakeRuntime(behaviour), store, lambda _: None).ctx, matrix,
                       results, pair, store.root)
        assert old.is_file()
        # GIVEN the same cells explained again, their runs now crashing (their kept
        # attributed runs gone: while one holds, it is reused, not run)
        for kept in (store.root / "explain").glob("v[34].gpu0.slow/attributed.json"):
            kept.unlink()
        said: list[str] = []
        got = explain_matrix(Sweep(matrix, FakeRuntime(lambda c: Behaviour(error="boom")),
                                   store, said.append).ctx, matrix, results, pair, store.root)
    finally:
        store.unlock()
    assert got == {} and not old.exists()
    assert any("left no where record" in s for s in said), said


def test_the_native_run_of_a_dated_image_keeps_the_pins_its_day_ran() -> None:
    """explain's second, native run adds memray to a venv's list: a dated image keeps
    the exact pins of its day beside memray (resolving the list again with memray as of
    the day could move them, or fail before memray was uploaded); with no pins known it
    runs as it is."""
    from types import SimpleNamespace

    from harness.explain import MEMRAY, with_memray
    from harness.matrixfile.model import ImageSpec

    @dataclasses.dataclass(frozen=True)
    class OneCell:              # what with_memray reads of a cell: its image
        image: ImageSpec

    ctx: Any = SimpleNamespace(runtime_for=lambda cell: SimpleNamespace(name="local"))
    dated = ImageSpec("aiohttp@2025-07-15", "python3", 1, pip=("aiohttp",),
                      python="python3", as_of="2025-07-15")
    cell: Any = OneCell(dated)
    pins = "aiohttp==3.12.14 multidict==6.6.3 yarl==1.20.1"
    got = with_memray(ctx, cell, pins).image
    assert got.pip == ("aiohttp==3.12.14", "multidict==6.6.3", "yarl==1.20.1", MEMRAY)
    assert got.as_of is None and got.label == "aiohttp@2025-07-15+memray"
    assert with_memray(ctx, cell, "").image is dated
    # an undated list gets memray beside it, as before; a list that has memray is kept
    plain = dataclasses.replace(dated, label="app", as_of=None)
    assert with_memray(ctx, OneCell(plain)).image.pip == ("aiohttp", MEMRAY)
    kept = dataclasses.replace(plain, pip=("aiohttp", "memray==1.15"))
    assert with_memray(ctx, OneCell(kept)).image is kept


@pytest.mark.parametrize(("rule", "memory", "fixed_in"), [
    ("one-run", "stable", "v4"), ("unsettled", "plateau", "v4"), ("one-run", "linear", "v5"),
    ("filling", "stable", "v5")])
def test_a_leak_from_the_first_image_is_paired_with_the_release_free_of_it(
        swept: tuple[matrixfile.Matrix, RunStore, dict[str, CellResult]],
        rule: str, memory: str, fixed_in: str) -> None:
    """A loaded CI's fixed release read `ambiguous` by its step time alone, its memory
    flat: the leak had no "fixed in" to be explained against. A release undecided about
    its time alone, its every memory source stable or levelled off, is free of a leak."""
    _, _, results = swept
    clean = results["v2.gpu0.loop"]
    trends = {k: dataclasses.replace(t, kind=memory)   # type: ignore[arg-type]
              for k, t in clean.memory.items()}
    assert trends, clean
    row = {"v3.gpu0.loop": results["v3.gpu0.loop"],
           "v4.gpu0.loop": dataclasses.replace(results["v4.gpu0.loop"], verdict="ambiguous",
                                               rule=rule, memory=trends),
           "v5.gpu0.loop": dataclasses.replace(clean, image=results["v5.gpu0.loop"].image,
                                               id="v5.gpu0.loop")}
    assert pairs(row) == [Pair("v3.gpu0.loop", f"{fixed_in}.gpu0.loop", "gpu0.loop")]


@pytest.mark.parametrize(("rule", "memory", "fixed"), [
    ("unsettled", "stable", "v4"), ("one-run", "plateau", "v4"), ("one-run", "linear", None),
    ("filling", "stable", None)])
def test_a_leaks_fix_is_the_release_free_of_it_though_its_time_is_undecided(
        swept: tuple[matrixfile.Matrix, RunStore, dict[str, CellResult]],
        rule: str, memory: str, fixed: str | None) -> None:
    """A loaded host left the fixed release (multidict 6.6.4 in docs/asof.md) `ambiguous`
    by its rounds alone, its memory flat: the summary said "no later good image" and the
    workaround left it out. The fix is read as the first-bad pairing reads it (`free_of`);
    a cell whose memory still grows, or that a memory rule left undecided, is a gap."""
    from harness.answers.search import answer_rows
    from harness.days.journey import fixed_in

    _, _, results = swept
    clean = results["v2.gpu0.loop"]
    trends = {k: dataclasses.replace(t, kind=memory)   # type: ignore[arg-type]
              for k, t in clean.memory.items()}
    row = {"v2.gpu0.loop": clean, "v3.gpu0.loop": results["v3.gpu0.loop"],
           "v4.gpu0.loop": dataclasses.replace(results["v4.gpu0.loop"], verdict="ambiguous",
                                               rule=rule, memory=trends),
           "v5.gpu0.loop": dataclasses.replace(clean, image=results["v5.gpu0.loop"].image,
                                               id="v5.gpu0.loop")}
    (answer,) = answer_rows(row)
    assert (answer.first_bad, answer.last_good) == ("v3", "v2"), answer
    # without the results, an `ambiguous` cell is a gap, as before
    assert fixed_in(answer) is None
    got = fixed_in(answer, row)
    assert (got[0] if got else None) == fixed, got
