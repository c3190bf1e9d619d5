"""`harness sweep --find-cause` over FakeRuntime: the whole journey in one command (the
call site, the package proved both ways, the first fixed image; on `hosts:`, whether the
host or the image changed the verdict), its summary in every renderer, nothing searched
where nothing is bad, and an interrupted chain resumed without losing or rerunning a
finished step."""

from __future__ import annotations

import dataclasses
import html
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakeruntime import LEAK_LINE, Behaviour, FakeRuntime
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sweepkit import on_the_cli, write_matrix

from harness.cli import main
from harness.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_REGRESSION
from harness.matrixfile.model import Cell
from harness.report import Report, read_run
from harness.report.model import md

GOOD = ("multidict==6.4.4", "yarl==1.9.4", "attrs==23.2.0")
BAD = ("multidict==6.6.3", "yarl==1.20.1", "attrs==25.3.0")
FIXED = ("multidict==6.6.4", "yarl==1.20.1", "attrs==25.3.0")
ROW = "cpu.loop"


def leaks_with(pin: str) -> Callable[[Cell], Behaviour]:
    """The truth: a cell leaks exactly where its pins hold `pin`."""
    return lambda c: Behaviour(leak_per_iter=6000) if pin in c.image.pip else Behaviour()


def three_images(tmp: Path, pins: tuple[tuple[str, ...], ...] = (GOOD, BAD, FIXED)) -> Path:
    return write_matrix(tmp, [{"name": n, "python": "python3", "pip": list(p)}
                              for n, p in zip("gbc", pins, strict=True)],
                        gpus=["none"], name="j")


def the_run(out: Path) -> Path:
    (run,) = (out / "j").iterdir()
    return run


def find_cause(matrix: Path, out: Path, *more: str) -> int:
    return main(["sweep", str(matrix), "--out", str(out), "--find-cause", "-q", *more])


def test_one_command_names_the_image_the_call_site_the_package_and_the_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN b's multidict 6.6.3 leaks, and c (multidict 6.6.4) does not
    on_the_cli(monkeypatch, FakeRuntime(leaks_with("multidict==6.6.3"), pins_as_packages=True))
    assert find_cause(three_images(tmp_path), tmp_path / "r") == EXIT_REGRESSION
    run = the_run(tmp_path / "r")
    said = json.loads((run / "cause" / f"{ROW}.json").read_text())
    summary = said["summary"]
    # THEN one summary: the first bad image, the package proved both ways, the call
    # site (the scenario's line the fake's where record names), the fix and the pins
    assert summary.startswith("went bad at image b (last good g): leak; "
                              "multidict 6.4.4 -> 6.6.3; with multidict 6.4.4: ok; "
                              "with multidict 6.6.3: leak: heap +")
    assert f"; at loop.py:{LEAK_LINE} step" in summary
    # (issue 51: a workaround names only versions the run measured)
    assert summary.endswith("; fixed from image c (multidict 6.6.4). Workaround: "
                            "multidict==6.4.4 or multidict==6.6.4 (both measured good; no "
                            "release between 6.4.4 and 6.6.3 was tested)")
    assert said["facts"]["cause"] == {"status": "found", "changes": [
        {"name": "multidict", "good": "6.4.4", "bad": "6.6.3"}]}
    assert said["facts"]["day"] == "not a date axis"
    # ... and the same summary in every renderer
    assert f"cause, {ROW}: {summary}" in " ".join(capsys.readouterr().out.split())
    assert md(summary) in (run / "report.md").read_text()
    assert html.escape(summary, quote=False) in (run / "report.html").read_text()
    assert json.loads((run / "results.json").read_text())["causes"][ROW]["summary"] == summary
    main(["report", str(run), "--issue", ROW])
    assert f"## Cause\n\n`harness sweep --find-cause` found (quoted):\n\n> {md(summary)}" \
        in capsys.readouterr().out


def test_nothing_bad_exits_0_and_searches_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = on_the_cli(monkeypatch, FakeRuntime(leaks_with("never"), pins_as_packages=True))
    assert find_cause(three_images(tmp_path), tmp_path / "r") == EXIT_OK
    run = the_run(tmp_path / "r")
    ran = [cid for rt in made if isinstance(rt, FakeRuntime) for cid in rt.runs]
    assert sorted(ran) == ["b.cpu.loop", "c.cpu.loop", "g.cpu.loop"]   # the sweep alone
    assert all(not rt.attributed for rt in made if isinstance(rt, FakeRuntime))
    assert not (run / "cause").exists() and not (run / "culprit").exists()
    assert json.loads((run / "results.json").read_text())["causes"] == {}


class InterruptedAt(FakeRuntime):
    """Ctrl-C as the `n`th run after `armed` is set starts."""

    def __init__(self, behave: Callable[[Cell], Behaviour], n: int):
        super().__init__(behave, pins_as_packages=True)
        self.n, self.armed = n, False

    def run(self, request: Any, progress: Any) -> Any:
        if self.armed:
            self.n -= 1
            if self.n == 0:
                raise KeyboardInterrupt
        return super().run(request, progress)


def test_ctrl_c_in_the_chain_then_resume_loses_nothing_and_reruns_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    truth = leaks_with("multidict==6.6.3")
    # The answer of an uninterrupted run, for the resumed one to equal.
    on_the_cli(monkeypatch, FakeRuntime(truth, pins_as_packages=True))
    assert find_cause(three_images(tmp_path / "whole"), tmp_path / "whole" / "r") == 1
    whole = json.loads((the_run(tmp_path / "whole" / "r") / "cause" / f"{ROW}.json"
                        ).read_text())

    # GIVEN Ctrl-C at the culprit's second hybrid: 3 sweep cells, 2 explain runs, 1 hybrid
    matrix = three_images(tmp_path)
    first = InterruptedAt(truth, n=3 + 2 + 2)
    first.armed = True
    on_the_cli(monkeypatch, first)
    assert find_cause(matrix, tmp_path / "r") == EXIT_INTERRUPTED
    run = the_run(tmp_path / "r")
    hybrids_done = [cid for cid in first.runs if cid.startswith("culprit-")]
    assert len(hybrids_done) == 1 and len(first.attributed) == 2
    assert not (run / "cause").exists()
    # WHEN the same command resumes
    again = FakeRuntime(truth, pins_as_packages=True)
    on_the_cli(monkeypatch, again)
    assert find_cause(matrix, tmp_path / "r", "--resume") == EXIT_REGRESSION
    # THEN no sweep cell, explain run or finished hybrid ran again ...
    assert not again.attributed
    assert not set(again.runs) & {*first.runs}, again.runs
    assert all(cid.startswith("culprit-") for cid in again.runs)
    # ... and the answer is the uninterrupted run's (its figures aside: the fake's noise
    # is seeded by the run's count)
    resumed = json.loads((run / "cause" / f"{ROW}.json").read_text())
    assert resumed["facts"] == whole["facts"]
    assert resumed["summary"].split(": leak: ")[0] == whole["summary"].split(": leak: ")[0]
    # AND a resume of a finished chain runs nothing at all
    idle = FakeRuntime(truth, pins_as_packages=True)
    on_the_cli(monkeypatch, idle)
    assert find_cause(matrix, tmp_path / "r", "--resume") == EXIT_REGRESSION
    assert idle.runs == [] and idle.attributed == []


def test_a_cause_whose_cells_ran_again_is_left_out_and_said(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on_the_cli(monkeypatch, FakeRuntime(leaks_with("multidict==6.6.3"), pins_as_packages=True))
    assert find_cause(three_images(tmp_path), tmp_path / "r") == 1
    root = the_run(tmp_path / "r")
    found = read_run(root)
    held = Report.from_results("j", found.results, root=root)
    assert not held.causes[ROW].stale
    # the fixed image's cell ran again (another run key): the summary rests on it
    fixed = found.results["c.cpu.loop"]
    assert fixed.key is not None
    results = {**found.results, "c.cpu.loop": dataclasses.replace(
        fixed, key=dataclasses.replace(fixed.key, params={"other": 1}))}
    report = Report.from_results("j", results, root=root)
    assert report.causes[ROW].stale
    assert report.cause_lines(ROW) == [
        f"stale: the cells it rests on changed since (c.cpu.loop); `harness sweep MATRIX "
        f"--find-cause --resume {root}` finds it again"]


# ---------------------------------------------------------------- is it the host?
def hosts_matrix(tmp: Path) -> Path:
    return write_matrix(tmp, ["img:v1", "img:v2"], runtime="docker", name="j", gpus=["none"],
                        hosts=[{"name": "old", "url": "unix:///old.sock"},
                               {"name": "new", "url": "unix:///new.sock"}])


@pytest.mark.parametrize(("bad_on_old", "changed_by"), [
    (False, "the host changed the verdict (new against old)"),
    (True, "the image changed the verdict, not the host"),
])
def test_hosts_sweep_runs_the_first_bad_image_on_the_old_host(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad_on_old: bool,
        changed_by: str) -> None:
    # GIVEN v2 leaks on the new host, and on the old one only where `bad_on_old`
    def truth(c: Cell) -> Behaviour:
        bad = c.image.label == "v2" and (c.host.label == "new" or bad_on_old)
        return Behaviour(leak_per_iter=6000) if bad else Behaviour()

    made = on_the_cli(monkeypatch, truth)
    # WHEN only the new host's cells are swept, with --find-cause
    assert find_cause(hosts_matrix(tmp_path), tmp_path / "r", "-k", "new") == 1
    # THEN v2 ran on the old host too, and the summary says which changed the verdict
    ran = [cid for rt in made if isinstance(rt, FakeRuntime) for cid in rt.runs]
    assert ran.count("old.v2.cpu.loop") == 1 and "old.v1.cpu.loop" not in ran
    said = json.loads((the_run(tmp_path / "r") / "cause" / "new.cpu.loop.json").read_text())
    assert changed_by in said["summary"]
    assert said["facts"]["hosts"] == [{
        "host": "old", "cell": "old.v2.cpu.loop", "how": "run",
        "verdict": "leak" if bad_on_old else "ok",
        "changed_by": "the image" if bad_on_old else "the host"}]


@pytest.mark.parametrize(("verdicts", "fixed"), [
    (["ok", "leak", "leak", "ok"], ("i3", "c3")),
    (["ok", "leak", "ambiguous", "ok"], None),     # never named across a cell that told nothing
    (["ok", "leak", "leak"], None),
    (["leak", "ok"], ("i1", "c1")),                # bad from the first image: its fix
])
def test_the_first_fixed_image(verdicts: list[str], fixed: tuple[str, str] | None) -> None:
    from harness.answers.search import RowAnswer, first_bad
    from harness.days.journey import fixed_in

    cells = [(f"i{i}", v, f"c{i}") for i, v in enumerate(verdicts)]
    bad, good, contiguous = first_bad([(label, v) for label, v, _ in cells])
    assert fixed_in(RowAnswer("r", "cpu", "s", cells, bad, good, contiguous, "")) == fixed


def test_a_cause_outside_the_packages_is_said_in_the_summary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN b's interpreter leaks whatever packages it has
    on_the_cli(monkeypatch, FakeRuntime(
        lambda c: Behaviour(leak_per_iter=6000) if c.image.python == "/usr/bin/python3"
        else Behaviour(), pins_as_packages=True))
    matrix = write_matrix(tmp_path, [{"name": "g", "python": "python3", "pip": list(GOOD)},
                                     {"name": "b", "python": "/usr/bin/python3",
                                      "pip": list(BAD)}], gpus=["none"], name="j")
    assert find_cause(matrix, tmp_path / "r") == EXIT_REGRESSION
    said = json.loads((the_run(tmp_path / "r") / "cause" / f"{ROW}.json").read_text())
    assert said["summary"].startswith(
        "went bad at image b (last good g): leak; not the packages: B with every package "
        "change undone is still bad")
    assert said["facts"]["cause"] == {"status": "outside", "changes": []}
    assert said["facts"]["workaround"] is None and "Workaround" not in said["summary"]


def test_progress_says_the_step_and_the_probes_left(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)   # one progress line per event
    on_the_cli(monkeypatch, FakeRuntime(leaks_with("multidict==6.6.3"), pins_as_packages=True))
    main(["sweep", str(three_images(tmp_path)), "--out", str(tmp_path / "r"), "--find-cause"])
    lines = [line for line in capsys.readouterr().err.splitlines()
             if line.startswith(f"harness: find-cause {ROW} [")]
    steps = [line.split("[")[1].split("]")[0] for line in lines]
    assert [s for i, s in enumerate(steps) if s not in steps[:i]] == [
        "1/6 day", "2/6 explain", "3/6 culprit", "4/6 code", "5/6 fixed", "6/6 host"]
    left = [int(line.rsplit("(about ", 1)[1].split()[0]) for line in lines]
    # explain's two runs, then each of culprit's probes, counted down; none left at the end
    assert left[0] >= 2 + 2 and left[-1] == 0
    assert all(a >= b for a, b in itertools.pairwise(left)), left


def test_a_cause_whose_row_has_another_first_bad_now_is_stale(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on_the_cli(monkeypatch, FakeRuntime(leaks_with("multidict==6.6.3"), pins_as_packages=True))
    assert find_cause(three_images(tmp_path), tmp_path / "r") == 1
    root = the_run(tmp_path / "r")
    found = read_run(root).results
    # an image between g and b, bad: the cells the cause rests on are unchanged, but the
    # row's first bad is x now
    b = found["b.cpu.loop"]

    def at(res: Any, index: int, label: str | None = None) -> Any:
        image = dataclasses.replace(res.image, index=index, label=label or res.image.label)
        return dataclasses.replace(res, image=image, id=f"{image.label}.{ROW}")

    moved = {"g.cpu.loop": found["g.cpu.loop"], "x.cpu.loop": at(b, 1, "x"),
             "b.cpu.loop": at(b, 2), "c.cpu.loop": at(found["c.cpu.loop"], 3)}
    report = Report.from_results("j", moved, root=root)
    assert report.causes[ROW].stale
    assert report.cause_lines(ROW)[0].startswith(
        "stale: the row's first bad or last good is another cell now;")


def test_the_day_seams_answer_heads_the_summary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the date axis's day search (`days.journey.day_of`) hands back is said first,
    and the fix as a day."""
    from harness.answers.search import answer_rows, pairs
    from harness.days.journey import DayAnswer, Journey, summary

    on_the_cli(monkeypatch, FakeRuntime(leaks_with("multidict==6.6.3"), pins_as_packages=True))
    # labels standing for dates
    images = [{"name": f"aio-2025-0{m}-15", "python": "python3", "pip": list(p)}
              for m, p in ((5, GOOD), (7, BAD), (9, FIXED))]
    assert find_cause(write_matrix(tmp_path, images, gpus=["none"], name="j"),
                      tmp_path / "r") == 1
    run = the_run(tmp_path / "r")
    results = read_run(run).results
    (pair,) = pairs(results)
    (row,) = answer_rows(results)
    culprit = json.loads((run / "culprit" / ROW / "culprit.json").read_text())
    day = DayAnswer("2025-05-15", "2025-07-15", ("multidict 6.4.4 -> 6.6.3 (uploaded "
                                                  "2025-06-30 14:02)",))
    said = summary(Journey(pair, row, day, culprit=culprit,
                           fixed=("aio@2025-09-15", f"aio-2025-09-15.{ROW}")), results)
    assert said.startswith("went bad between 2025-05-15 and 2025-07-15: multidict 6.4.4 -> "
                           "6.6.3 (uploaded 2025-06-30 14:02): leak; ")
    assert "; fixed from 2025-09-15 (multidict 6.6.4). Workaround: multidict==6.4.4 or " \
           "multidict==6.6.4 (both measured good; no release between 6.4.4 and 6.6.3 was " \
           "tested)" in said


def test_a_day_answer_bounds_the_workaround(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The day search saw multidict move 6.4.4 -> 6.5.1 between the last good and the
    first bad day: the workaround keeps below the first bad day's version, not below
    B's."""
    from harness.answers.search import answer_rows, pairs
    from harness.days.journey import DayAnswer, Journey, workaround

    on_the_cli(monkeypatch, FakeRuntime(leaks_with("multidict==6.6.3"), pins_as_packages=True))
    assert find_cause(three_images(tmp_path), tmp_path / "r") == 1
    run = the_run(tmp_path / "r")
    results = read_run(run).results
    (pair,) = pairs(results)
    (row,) = answer_rows(results)
    culprit = json.loads((run / "culprit" / ROW / "culprit.json").read_text())
    day = DayAnswer("2025-06-24", "2025-06-25", ("multidict 6.4.4 -> 6.5.1",),
                    (("multidict", "6.4.4", "6.5.1"), ("not-in-g-or-b", None, "1.0")))
    journey = Journey(pair, row, day, culprit=culprit)
    assert workaround(journey, results) == ("multidict==6.4.4 (the one measured good; no "
                                            "release between 6.4.4 and 6.5.1 was tested)")
    assert workaround(Journey(pair, row, None, culprit=culprit), results) == (
        "multidict==6.4.4 (the one measured good; no release between 6.4.4 and 6.6.3 was "
        "tested)")


@pytest.mark.parametrize(("verdicts", "fixed"), [
    (("ok", "leak", "slowdown", "ok"), "c"),      # the leak is gone at c, though it slows
    (("ok", "leak", "regression"), "c"),
    (("ok", "leak", "oom", "ok"), "d"),           # out of memory: still the memory question
    (("ok", "slowdown", "leak", "ok"), "d"),      # a time question needs a good image
    (("ok", "leak", "ambiguous", "ok"), None),    # never across a cell that told nothing
    (("ok", "leak", "leak"), None),
])
def test_fixed_from_answers_the_first_bad_images_own_question(
        verdicts: tuple[str, ...], fixed: str | None) -> None:
    """Issue 51: memory and time are separate questions: a later image that no longer
    leaks fixed the leak, even where it is slower than the baseline."""
    from harness.answers.search import RowAnswer
    from harness.days.journey import fixed_in

    labels = "abcd"[:len(verdicts)]
    row = RowAnswer("cpu.s", "cpu", "s", [(x, v, f"{x}.cpu.s") for x, v in
                                          zip(labels, verdicts, strict=True)],
                    "b", "a", True, "")
    got = fixed_in(row)
    assert (got[0] if got else None) == fixed


# ------------------------------------------------- one culprit search, everywhere (issue 51)
def pydantic_like(day: str) -> dict[str, str]:
    """A made-up index: a pins b exactly (pydantic and pydantic-core); both move on
    2024-09-05 and again on 2024-09-18; c moves alone on 2024-09-10."""
    if day >= "2024-09-18":
        a, b = "2.9.2", "2.23.4"
    elif day >= "2024-09-05":
        a, b = "2.9.1", "2.23.3"
    else:
        a, b = "2.8.2", "2.20.1"
    return {"a": a, "b": b, "c": "4.12.2" if day >= "2024-09-10" else "4.12.0"}


PINNED = {("a", "2.8.2"): {"b": "2.20.1"}, ("a", "2.9.1"): {"b": "2.23.3"},
          ("a", "2.9.2"): {"b": "2.23.4"}}


def dated_matrix(tmp: Path, days: list[str]) -> Path:
    return write_matrix(tmp, [{"name": "app", "python": "python3", "pip": ["a"],
                               "as_of": days}], gpus=["none"], name="j")


def no_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """The day search asks the index nothing (upload times, yanked releases)."""
    # patched where they are used: the day search and the resolver
    monkeypatch.setattr("harness.days.search.upload_time", lambda name, version: None)
    for where in ("harness.days.search", "harness.runtimes.resolver"):
        monkeypatch.setattr(f"{where}.yanked_releases", lambda name: {})


def same_search(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Two culprit.json answers of one search: the same runs, probes and answer."""
    def probes(d: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [(p["side"], p["changes"], p["outcome"]) for p in d["probes"]]

    assert (a["good"], a["bad"], a["status"], a["answer"], probes(a)) == (
        b["good"], b["bad"], b["status"], b["answer"], probes(b))


def test_find_cause_and_culprit_search_the_days_found_and_split_a_pair_pinned_together(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 51 item 1: pydantic 2.9.1 -> 2.9.2 and pydantic-core 2.23.3 -> 2.23.4 moved on
    one day, and only the core leaks. --find-cause swapped both between the axis's ends
    (2024-09-01, 2024-10-01) in two probes and blamed both; `harness culprit` split them.
    Now both search between the days the day search found, each hybrid that holds the
    pinned pair apart goes in --no-deps, and both name b alone."""
    from fakeruntime import DatedIndex

    no_index(monkeypatch)
    runtime = DatedIndex(tmp_path / "cache", pydantic_like,
                         lambda c: Behaviour(leak_per_iter=6000)
                         if "b==2.23.4" in c.image.pip else Behaviour(), PINNED)
    on_the_cli(monkeypatch, runtime)
    assert find_cause(dated_matrix(tmp_path, ["2024-09-01", "2024-10-01"]),
                      tmp_path / "r") == EXIT_REGRESSION
    run = the_run(tmp_path / "r")
    said = json.loads((run / "cause" / f"{ROW}.json").read_text())
    assert said["facts"]["day"]["last_good"] == "2024-09-17"
    assert said["facts"]["day"]["first_bad"] == "2024-09-18"
    # THEN the cause is b alone, proved both ways between the two days' environments
    assert said["facts"]["cause"] == {"status": "found", "changes": [
        {"name": "b", "good": "2.23.3", "bad": "2.23.4"}]}
    assert "; b 2.23.3 -> 2.23.4; with b 2.23.3: ok; with b 2.23.4: leak" in said["summary"]
    assert said["summary"].endswith("Workaround: b==2.23.3 (the one measured good; no "
                                    "release between 2.23.3 and 2.23.4 was tested)")
    found = json.loads((run / "culprit" / ROW / "culprit.json").read_text())
    # (the last good day's run: the day search's probe of 2024-09-16, same pins as 09-17)
    assert (found["good"], found["bad"]) == (f"app@2024-09-16.{ROW}", f"app@2024-10-01.{ROW}")
    assert [c["name"] for c in found["difference"]["packages"]] == ["a", "b"]
    # ... each hybrid that holds a and b apart installed --no-deps, and said so
    loose = {p["no_deps"] for p in found["probes"] if p["no_deps"]}
    assert loose == {"a==2.9.1 depends on b==2.23.3", "a==2.9.2 depends on b==2.23.4"}
    assert ("a==2.9.1", "b==2.23.4", "c==4.12.2") in [r for r, deps in runtime.built if deps]

    # THEN `harness culprit` on the same directory searches the same two runs the same
    # way and names the same cause
    assert main(["culprit", str(run), ROW, "-q"]) == EXIT_REGRESSION
    same_search(found, json.loads((run / "culprit" / ROW / "culprit.json").read_text()))


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(min_value=1, max_value=4).flatmap(lambda n: st.tuples(
    st.just(n), st.sets(st.integers(0, n - 1), min_size=1),
    st.sets(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1))))))
@example((2, {1}, {(0, 1)}))             # pydantic and its core: the core alone leaks
@example((3, {0, 2}, {(0, 2), (1, 0)}))  # two that leak only together, pinned together
def test_find_cause_names_what_culprit_names_on_the_same_cells(
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
        case: tuple[int, set[int], set[tuple[int, int]]]) -> None:
    """For n packages that move on one day (some pinning others exactly), an unrelated
    one that moved before, and a random set of them that leaks only all at its new
    version: --find-cause's cause is `harness culprit`'s on the same cells, and the
    truth."""
    from fakeruntime import DatedIndex

    n, culprits, pinned = case
    names = [f"p{i}" for i in range(n)]

    def history(day: str) -> dict[str, str]:
        moved = day >= "2024-09-20"
        return {"z": "2" if day >= "2024-09-05" else "1",
                **{p: "2.0" if moved else "1.0" for p in names}}

    requires = {(names[i], v): {names[j]: v} for i, j in pinned if i != j
                for v in ("1.0", "2.0")}
    truth = {f"{names[i]}==2.0" for i in culprits}
    tmp = tmp_path_factory.mktemp("case")
    no_index(monkeypatch)
    runtime = DatedIndex(tmp / "cache", history, lambda c: Behaviour(leak_per_iter=6000)
                         if truth <= set(c.image.pip) else Behaviour(), requires)
    on_the_cli(monkeypatch, runtime)
    assert find_cause(dated_matrix(tmp, ["2024-09-01", "2024-10-01"]), tmp / "r") == 1
    run = the_run(tmp / "r")
    cause = json.loads((run / "cause" / f"{ROW}.json").read_text())["facts"]["cause"]
    journey = json.loads((run / "culprit" / ROW / "culprit.json").read_text())
    assert main(["culprit", str(run), ROW, "-q"]) == 1
    alone = json.loads((run / "culprit" / ROW / "culprit.json").read_text())
    same_search(journey, alone)
    assert cause == {"status": "found", "changes": [
        {"name": c["name"], "good": c["good"], "bad": c["bad"]} for c in alone["answer"]]}
    assert sorted(c["name"] for c in cause["changes"]) == sorted(names[i] for i in culprits)
