"""analysis.where: where records ranked per call and matched between the last good and
the first bad cell by the scenario's own line (a library's line numbers move between
releases), in words a reader can act on."""

from __future__ import annotations

from typing import Any

import pytest

from harness.analysis.where import diff, notes, parse_where, shares, site_key, summary

SCEN = "multidict_pop.py"
OLD_LIB = "/venv-a/lib/python3.11/site-packages/multidict/_multidict_py.py"
NEW_LIB = "/venv-b/lib/python3.11/site-packages/multidict/_multidict_py.py"


def record(calls: int = 100, **parts: Any) -> dict[str, Any]:
    return {"type": "where", "kinds": list(parts) or ["heap"], "calls": calls, **parts}


def heap(*sites: tuple[int, list[list[Any]]], start: int = 0, end: int | None = None
         ) -> dict[str, Any]:
    total = sum(size for size, _ in sites)
    return {"traced_start": start, "traced_end": start + total if end is None else end,
            "sites": [{"size": size, "count": 1, "frames": frames} for size, frames in sites]}


def at(lib: str, lib_line: int) -> list[list[Any]]:
    return [[lib, lib_line, "pop"], [f"/harness/scenario/{SCEN}", 19, "step"]]


def test_a_site_is_matched_across_releases_by_the_scenarios_line_not_the_librarys() -> None:
    assert site_key(at(OLD_LIB, 120), SCEN) == site_key(at(NEW_LIB, 377), SCEN)
    assert site_key(at(OLD_LIB, 120), SCEN) == "multidict_pop.py:19 step -> multidict pop"
    other = [[OLD_LIB, 120, "pop"], [f"/harness/scenario/{SCEN}", 21, "step"]]
    assert site_key(other, SCEN) != site_key(at(OLD_LIB, 120), SCEN)


def test_the_diff_names_the_bad_site_per_call_and_its_absence_in_the_good_cell() -> None:
    good = parse_where(record(heap=heap((20, at(OLD_LIB, 120)))))
    bad = parse_where(record(heap=heap((600_000, at(NEW_LIB, 377)), (30, at(NEW_LIB, 12)))))
    lines = diff(good, bad, SCEN, "6.4.4", "6.5.1",
                 source=lambda name, line: "md.pop(k)" if (name, line) == (SCEN, 19) else None)
    assert lines == ["heap: +5.9 KiB/call at multidict_pop.py:19 step (md.pop(k)) -> multidict "
                     "pop in 6.5.1; 0 in 6.4.4"]


def test_a_site_that_grows_in_both_cells_says_so() -> None:
    good = parse_where(record(heap=heap((300_000, at(OLD_LIB, 1)))))
    bad = parse_where(record(heap=heap((900_000, at(NEW_LIB, 2)))))
    [line] = diff(good, bad, SCEN, "a", "b")
    assert line.endswith("in b; +2.9 KiB/call in a"), line


def test_notes_split_the_heaps_growth_into_python_seen_and_native() -> None:
    w = parse_where(record(heap=heap((100 * 1024, at(NEW_LIB, 2)))))
    [line] = notes(w, heap_rate=4 * 1024.0)
    assert line == ("heap: Python's allocator saw +1.0 KiB/call of the heap's +4.0 KiB/call; "
                    "the rest, +3.0 KiB/call, is native, not seen by Python's allocator")
    [whole] = notes(w, heap_rate=1024.0)
    # all of it seen by Python's allocator: a C extension's leak (multidict's pop() is C)
    # allocates through it too, so nothing is said to be, or not be, native
    assert whole.endswith("all of it went through Python's allocator (from Python code or "
                          "from a C extension calling it), so the sites account for it"), whole
    assert "native" not in whole


def test_parts_that_could_not_be_taken_are_said_unless_they_do_not_apply() -> None:
    w = parse_where({"type": "where", "kinds": ["heap", "device", "native"], "calls": 10,
                     "native": {"unavailable": "memray is not importable in this image"},
                     "errors": {"device": "RuntimeError: torch is not imported by the "
                                          "scenario"}})
    assert notes(w) == ["native: not attributed: memray is not importable in this image"]


def test_stack_shares_and_the_function_that_took_the_late_time() -> None:
    slow = [["/s/x.py", 7, "growing_work"], [f"/harness/scenario/{SCEN}", 30, "step"]]
    fast = [["/s/x.py", 3, "fixed_work"], [f"/harness/scenario/{SCEN}", 29, "step"]]
    stack = {"hz": 200, "windows": {"early": {"samples": 100}, "late": {"samples": 100}},
             "sites": [{"frames": slow, "early": 20, "late": 90},
                       {"frames": fast, "early": 80, "late": 10}]}
    bad = parse_where(record(stack=stack))
    got = shares(bad, SCEN)
    assert got["multidict_pop.py:30 step -> x.py growing_work"] == (0.2, 0.9)
    lines = diff(None, bad, SCEN, "old", "new")
    assert lines[0].startswith("time: 90% of late samples in multidict_pop.py:30 step -> x.py "
                               "growing_work in new (early 20%)"), lines


def test_ops_diff_says_which_op_slowed_and_whether_it_still_rises() -> None:
    def ops(early: float, late: float) -> dict[str, Any]:
        return {"source": "tf1-step-stats",
                "ops": [{"name": "spectrum", "op": "RFFT", "early_us": early, "late_us": late},
                        {"name": "add", "op": "AddV2", "early_us": 5.0, "late_us": 5.0}]}

    good = parse_where(record(ops=ops(200.0, 210.0)))
    bad = parse_where(record(ops=ops(300.0, 3000.0)))
    lines = diff(good, bad, SCEN, "1.15.4", "1.15.5")
    assert lines[0] == ("op spectrum (RFFT): 0.21 ms/call in 1.15.4, 3.00 ms/call and rising "
                        "in 1.15.5")
    assert summary(bad, SCEN)[0] == "op spectrum (RFFT): 0.30 ms/call early, 3.00 ms/call late"


def test_malformed_parts_are_problems_not_errors() -> None:
    w = parse_where({"type": "where", "calls": 5, "kinds": ["heap"],
                     "heap": {"sites": [{"size": 5, "frames": "nope"},
                                        {"size": 9000, "frames": [["/a.py", 1, "f"]]}]},
                     "ops": {"ops": [{"op": "x"}]}})
    assert len(w.problems) == 2
    assert [s.size for s in w.sites["heap"]] == [9000]


def test_a_functions_samples_on_several_of_its_lines_are_one_function() -> None:
    """A sampled stack carries the line the function was on: a loop's time falls on its
    `for` line and its body's lines. Split by line, no line of the function that slowed
    reached the 5% a diff names (five lines of 4% each); as one function it is 20%."""
    def stack(lines: dict[int, tuple[int, int]], other: tuple[int, int]) -> dict[str, Any]:
        sites = [{"frames": [[f"/s/{SCEN}", line, "growing"], [f"/s/{SCEN}", 30, "step"]],
                  "early": e, "late": late} for line, (e, late) in lines.items()]
        sites.append({"frames": [[f"/s/{SCEN}", 3, "fixed"], [f"/s/{SCEN}", 29, "step"]],
                      "early": other[0], "late": other[1]})
        return {"windows": {"early": {"samples": 100}, "late": {"samples": 100}},
                "sites": sites}

    good = parse_where(record(stack=stack({40: (1, 1)}, (99, 99))))
    bad = parse_where(record(stack=stack({40: (1, 3), 41: (0, 4), 42: (0, 4), 43: (0, 4),
                                          44: (0, 6)}, (99, 79))))
    got = shares(bad, SCEN)
    assert list(got) == [f"{SCEN}:44 growing", f"{SCEN}:3 fixed"]
    assert got[f"{SCEN}:44 growing"] == pytest.approx((0.01, 0.21))
    lines = diff(good, bad, SCEN, "old", "new")
    # matched with the good cell's growing though its most sampled line there is 40
    assert lines == [f"time: 21% of late samples in {SCEN}:44 growing in new (early 1%); "
                     "1% in old"], lines


def test_a_comprehension_is_named_by_the_function_it_is_written_in() -> None:
    """Issue 51: explain named `step.<locals>.<genexpr>` (the innermost code on a line)
    where the user wrote `step`; the line stays the comprehension's own."""
    own = f"/harness/scenario/{SCEN}"
    # GIVEN heap sites allocated in a generator expression of step (Python 3.11+ names:
    # tracemalloc's step frame on that line named for the innermost code there too) and
    # in a lambda inside a method, below a library's list comprehension
    genexpr = [[own, 19, "step.<locals>.<genexpr>"], [own, 19, "step.<locals>.<genexpr>"]]
    lam = [[OLD_LIB, 5, "MultiDict.pop.<locals>.<listcomp>"],
           [own, 23, "Cache.fill.<locals>.<lambda>"], [own, 30, "step"]]
    w = parse_where(record(heap=heap((60_000, genexpr), (30_000, lam))))
    # THEN each is said as the function written around it, at its own line
    assert summary(w, SCEN) == [
        "heap: +600 B/call at multidict_pop.py:19 step",
        "heap: +300 B/call at multidict_pop.py:23 Cache.fill -> multidict MultiDict.pop"]
    # AND Python before 3.11 (a bare `<genexpr>`, no qualified name) names it by the frame
    # of its file running it; code outside any function keeps its own name
    assert site_key([[own, 19, "<genexpr>"], [own, 19, "step"]], SCEN) == (
        "multidict_pop.py:19 step")
    assert site_key([[own, 2, "<listcomp>"], [own, 2, "<module>"]], SCEN) == (
        "multidict_pop.py:2 <module>")
    assert site_key([[own, 2, "<lambda>"]], SCEN) == "multidict_pop.py:2 <lambda>"


def test_a_site_is_named_only_above_the_floor_of_the_cells_run() -> None:
    """Issue 63 item 6: a one-time allocation of 60 KB in a 300-call attributed run reads
    +0.2 KiB/call; where the sweep's run of the cell could tell no leak under 300 B/call,
    it is not named a site."""
    once = parse_where(record(calls=300, heap=heap((60_000, at(NEW_LIB, 817)))))
    assert summary(once, SCEN)[0].startswith("heap: +200 B/call at")  # no floor given
    floor = {"heap": 300.0}
    assert summary(once, SCEN, floors=floor) == [
        "heap: no site grew over 300 calls above the run's floor (300 B/call)"]
    assert diff(None, once, SCEN, "", "b", floors=floor) == []
    grown = parse_where(record(calls=300, heap=heap((300 * 1024, at(NEW_LIB, 817)))))
    assert summary(grown, SCEN, floors=floor)[0].startswith("heap: +1.0 KiB/call at")


def test_a_sites_rate_is_written_as_the_verdicts_is() -> None:
    """Issue 79 item 13: the where line wrote `+0.2 KiB/call` beside the verdict's
    `+216 B/call`: a rate under 1 KiB a call is said in bytes everywhere (SMALL_RATE)."""
    from harness.analysis.records import rate_words

    w = parse_where(record(calls=300, heap=heap((300 * 216, at(NEW_LIB, 817)))))
    assert summary(w, SCEN)[0].startswith(f"heap: {rate_words(216.0)} at"), summary(w, SCEN)
    assert rate_words(216.0) == "+216 B/call"
    [change] = diff(None, w, SCEN, "", "b")
    assert change.startswith("heap: +216 B/call at"), change


def test_a_regression_of_time_alone_is_not_attributed_for_memory() -> None:
    """Issue 63 item 6: "heap: +0.2 KiB/call at core.py:817" beside a time regression
    whose heap read 0.25 B/call in both versions: memory is named only where it is bad."""
    from harness.explain import kinds_for
    from tests.resultkit import as_result

    def regression(peak: str) -> Any:
        return as_result({"verdict": "regression", "vs_baseline": {
            "baseline": "a", "peak_rss": {"ratio": 1.6 if peak == "higher" else 1.0,
                                          "direction": peak}}})

    assert "heap" not in kinds_for(regression("~"))
    assert "stack" in kinds_for(regression("~"))
    assert "heap" in kinds_for(regression("higher"))
    assert "heap" in kinds_for(as_result({"verdict": "leak"}))
