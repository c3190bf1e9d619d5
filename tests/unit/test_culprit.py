"""harness culprit over FakeRuntime: the difference, hybrids as cells, the answer."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import sweepkit
from fakeruntime import Behaviour, FakeRuntime

from harness import matrixfile
from harness.analysis.records import MemoryTrend
from harness.cli import main
from harness.culprit.changes import Change, difference
from harness.culprit.plan import (
    CulpritOutcome,
    culprit,
    drift_of,
    outcome_of,
    pins_of,
    sweep_runner,
    workaround,
)
from harness.culprit.search import APPLY, FOUND, OUTSIDE, UNDO
from harness.matrixfile.model import Cell, ImageSpec, Matrix
from harness.result.model import CellResult, Fingerprint, ImagePart, load_result
from harness.stages.orchestrator import Sweep
from harness.store import RunStore
from harness.store.results import SeriesCache

SCENARIO = "def setup(params):\n    return None\n\n\ndef step(state):\n    pass\n"
GOOD_PINS = {"multidict": "6.4.4", "yarl": "1.9.4", "attrs": "23.2.0", "frozenlist": "1.4.1",
             "idna": "3.6", "pip": "24.0"}
RESULT = CellResult("culprit-x.cpu.loop", "cpu.loop", "ok", ImagePart("culprit-x", 1, "python3",
                                                                   None))
BAD_PINS = {"multidict": "6.6.3", "yarl": "1.20.1", "attrs": "25.3.0", "frozenlist": "1.7.0",
            "propcache": "0.3.2", "pip": "25.1"}


def pins(d: dict[str, str]) -> str:
    return "[" + ", ".join(f"{k}=={v}" for k, v in d.items()) + "]"


def make_matrix(tmp: Path, good: dict[str, str] = GOOD_PINS, bad: dict[str, str] = BAD_PINS,
                python_b: str = "python3") -> Matrix:
    (tmp / "loop.py").write_text(SCENARIO)
    (tmp / "m.yaml").write_text(
        "name: cul\nruntime: local\n"
        "defaults: {iterations: 200, warmup: 10, sample_every: 5, repeats: 0}\n"
        f"matrix:\n  image:\n    - {{name: g, python: python3, pip: {pins(good)}}}\n"
        f"    - {{name: b, python: {python_b}, pip: {pins(bad)}}}\n"
        "  gpu: [none]\n  scenario: [loop.py]\n")
    return matrixfile.load(tmp / "m.yaml")


def leaks_when(bad: Callable[[set[str]], bool]) -> Callable[[Cell], Behaviour]:
    return lambda c: Behaviour(leak_per_iter=6000) if bad(set(c.image.pip)) else Behaviour()


def swept(tmp: Path, matrix: Matrix, behave: Callable[[Cell], Behaviour]
          ) -> tuple[dict[str, CellResult], RunStore]:
    store = RunStore(tmp / "sweep")
    runtime = FakeRuntime(behave, pins_as_packages=True)
    out = Sweep(matrix, runtime, store, lambda _: None).run(list(matrix.cells), resume=False)
    return out.results, store


def search(tmp: Path, behave: Callable[[Cell], Behaviour], matrix: Matrix | None = None
           ) -> tuple[CulpritOutcome, FakeRuntime, list[str]]:
    matrix = matrix or make_matrix(tmp)
    results, store = swept(tmp, matrix, behave)
    g, b = sorted(matrix.cells, key=lambda c: c.image.index)
    runtime = FakeRuntime(behave, pins_as_packages=True)
    sweep = Sweep(matrix, runtime, RunStore(store.root / "culprit" / b.row), lambda _: None)
    said: list[str] = []
    out = culprit(g, results[g.id], b, results[b.id],
                  sweep_runner(sweep, g, results[g.id], SeriesCache(store.root)(g.id)),
                  said.append)
    return out, runtime, said


def test_the_difference_lists_changed_added_removed_and_tooling_apart(tmp_path: Path) -> None:
    matrix = make_matrix(tmp_path)
    results, _ = swept(tmp_path, matrix, lambda c: Behaviour())
    g, b = sorted(results.values(), key=lambda r: r.image.index)
    diff = difference(g, b)
    assert [str(c) for c in diff.packages] == [
        "attrs 23.2.0 -> 25.3.0", "frozenlist 1.4.1 -> 1.7.0", "idna removed (3.6)",
        "multidict 6.4.4 -> 6.6.3", "propcache added (0.3.2)", "yarl 1.9.4 -> 1.20.1"]
    assert ("pip pip", "24.0", "25.1") in diff.other


def test_pins_of_a_hybrid() -> None:
    undo = [Change("multidict", "6.4.4", "6.6.3"), Change("propcache", None, "0.3.2")]
    assert pins_of(BAD_PINS, undo, UNDO) == (
        "attrs==25.3.0", "frozenlist==1.7.0", "multidict==6.4.4", "yarl==1.20.1")
    assert pins_of(GOOD_PINS, undo, APPLY) == (
        "attrs==23.2.0", "frozenlist==1.4.1", "idna==3.6", "multidict==6.6.3",
        "propcache==0.3.2", "yarl==1.9.4")


def test_one_package_among_six_is_named_and_proved_both_ways(tmp_path: Path) -> None:
    # GIVEN only multidict 6.6.3 leaks
    out, runtime, said = search(tmp_path, leaks_when(lambda p: "multidict==6.6.3" in p))
    assert out.found and out.search is not None
    assert [c.name for c in out.search.answer] == ["multidict"]
    undo = out.probe(UNDO, out.search.answer)
    apply = out.probe(APPLY, out.search.answer)
    assert undo is not None and undo.outcome == "good" and undo.how == "run"
    assert apply is not None and apply.outcome == "bad" and apply.result is not None
    assert apply.result.verdict == "leak"
    # B with everything undone is G itself: answered from the sweep, not run
    assert out.probes[0].how == "G's sweep cell"
    assert len(runtime.runs) == out.runs == len(out.probes) - 1
    text = out.sentence()
    assert text.startswith("cause: multidict 6.4.4 -> 6.6.3. B with multidict 6.4.4: ok")
    assert "G with multidict 6.6.3: leak" in text
    # the workaround says the pins and the command, never the cached venv's key
    assert ("Workaround: pin multidict==6.4.4 in B: `pip install multidict==6.4.4` in B's "
            "environment (in the matrix: multidict==6.4.4 in B's `pip:` list).") in text
    assert undo.image.startswith("culprit-") and undo.image not in text
    assert len(said) == len(out.probes)
    # each hybrid ran as a cell of its own, kept under culprit/<row>/cells
    assert all(r.startswith("culprit-") for r in runtime.runs)


def test_a_workaround_names_an_image_only_where_one_can_be_run() -> None:
    answer = [Change("multidict", "6.4.4", "6.6.3"), Change("propcache", None, "0.3.2")]
    # an image the engine holds: its tag, which `docker run` takes
    on_docker = workaround(answer, "harness-culprit/stack-2025:bf87f6061b17")
    assert on_docker == ("pin multidict==6.4.4 and uninstall propcache in B: `pip install "
                         "multidict==6.4.4` then `pip uninstall -y propcache` in B's "
                         "environment; `harness-culprit/stack-2025:bf87f6061b17` on the "
                         "engine is B with that change, proved.")
    # a local hybrid is a venv keyed by its recipe: its key is not said
    local = workaround(answer, "culprit-7b03fbd3be")
    assert "culprit-7b03fbd3be" not in local and local.endswith(
        "(in the matrix: multidict==6.4.4 in B's `pip:` list and propcache out of it).")


def test_a_cause_outside_the_packages_is_said_with_what_else_differs(tmp_path: Path) -> None:
    # GIVEN B's interpreter leaks whatever the packages installed with it
    matrix = make_matrix(tmp_path, python_b="/usr/bin/python3")
    out, runtime, _ = search(tmp_path, lambda c: Behaviour(leak_per_iter=6000)
                             if c.image.python == "/usr/bin/python3" else Behaviour(), matrix)
    assert out.search is not None and out.search.status == OUTSIDE
    # one probe: B's interpreter with G's pins, run (it is neither sweep cell)
    assert len(out.probes) == 1 and len(runtime.runs) == 1
    assert out.probes[0].result is not None and out.probes[0].result.verdict == "leak"
    assert out.sentence().startswith(
        "not the packages: B with every package change undone is still bad (6 undone). "
        "What else differs: ")


def test_an_unbuildable_hybrid_is_untestable(tmp_path: Path) -> None:
    # GIVEN any hybrid with yarl 1.9.4 next to multidict 6.6.3 cannot run (a conflict)
    def behave(c: Cell) -> Behaviour:
        p = set(c.image.pip)
        if c.image.label.startswith("culprit-") and {"yarl==1.9.4", "multidict==6.6.3"} <= p:
            return Behaviour(error="ImportError: yarl needs multidict<6.5")
        return Behaviour(leak_per_iter=6000) if "multidict==6.6.3" in p else Behaviour()

    out, _, _ = search(tmp_path, behave)
    assert out.search is not None
    assert any(p.outcome == "untestable" for p in out.probes)
    assert out.search.status != FOUND   # G with multidict 6.6.3 alone could not run
    assert [c.name for c in out.search.answer] == ["multidict"]


def test_b_not_bad_runs_nothing(tmp_path: Path) -> None:
    out, runtime, _ = search(tmp_path, lambda c: Behaviour())
    assert out.not_bad and out.probes == [] and runtime.runs == []
    assert out.sentence().startswith("B is not bad: b is ok")


@pytest.mark.parametrize("pair", [("attrs", "yarl")])
def test_a_pair_on_the_run_path(tmp_path: Path, pair: tuple[str, str]) -> None:
    wanted = {f"{n}=={BAD_PINS[n]}" for n in pair}
    out, _, _ = search(tmp_path, leaks_when(lambda p: wanted <= p))
    assert out.found and out.search is not None
    assert [c.name for c in out.search.answer] == list(pair)


# ---------------------------------------------------------------- CLI
@pytest.fixture
def fake_cli(monkeypatch: pytest.MonkeyPatch) -> list[FakeRuntime]:
    made: list[FakeRuntime] = []

    def get_runtime(name: str, docker_host: str | None = None) -> FakeRuntime:
        made.append(FakeRuntime(leaks_when(lambda p: "multidict==6.6.3" in p),
                                pins_as_packages=True))
        return made[-1]

    monkeypatch.setattr("harness.runtimes.get_runtime", get_runtime)
    return made


def test_cli_culprit(tmp_path: Path, fake_cli: list[FakeRuntime],
                     capsys: pytest.CaptureFixture[str]) -> None:
    make_matrix(tmp_path)
    assert main(["sweep", str(tmp_path / "m.yaml"), "--out", str(tmp_path / "r"), "-q"]) == 1
    capsys.readouterr()
    base = tmp_path / "r" / "cul"
    assert main(["culprit", str(base), "-q"]) == 1
    out = capsys.readouterr().out
    assert "culprit cpu.loop: G g (ok) vs B b (leak)" in out
    assert "  6 package change(s) from g to b:" in out
    assert "cpu.loop: cause: multidict 6.4.4 -> 6.6.3. B with multidict 6.4.4: ok" in out
    (run,) = base.iterdir()
    saved = json.loads((run / "culprit" / "cpu.loop" / "culprit.json").read_text())
    assert saved["status"] == "found" and saved["answer"][0]["name"] == "multidict"
    assert {"side": "apply", "changes": ["multidict"], "outcome": "bad"}.items() <= next(
        p for p in saved["probes"] if p["side"] == "apply").items()
    # the sweep's reports carry the answer
    md = (run / "report.md").read_text()
    assert "**Culprit** (`harness culprit`): cause: multidict 6.4.4 -> 6.6.3." in md
    assert "- probe 1: B with attrs, frozenlist, idna, multidict, propcache, yarl undone" in md
    html = (run / "report.html").read_text()
    assert "<b>culprit</b>: cause: multidict 6.4.4 -&gt; 6.6.3." in html
    culprits = json.loads((run / "results.json").read_text())["culprits"]
    assert culprits["cpu.loop"]["status"] == "found"
    capsys.readouterr()
    assert main(["report", str(run)]) == 1
    assert "culprit, cpu.loop: cause: multidict 6.4.4 -> 6.6.3." in capsys.readouterr().out
    main(["report", str(run), "--issue", "cpu.loop"])
    assert ("The change that did it, `harness culprit` (quoted):\n\n> cause: multidict "
            "6.4.4 -> 6.6.3." in capsys.readouterr().out)
    # a second culprit over the same directory runs nothing: each hybrid's result is
    # reused where its run key is unchanged
    runs_before = len(fake_cli)
    assert main(["culprit", str(base), "-q"]) == 1
    assert all(rt.runs == [] for rt in fake_cli[runs_before:])
    assert "(0 run)" in capsys.readouterr().out


@pytest.mark.parametrize(("extra", "message"), [
    (["gpu0.nope"], "no row 'gpu0.nope' in this directory (allowed values: cpu.loop)"),
    (["--good", "zz"], "--good zz: no cell of row cpu.loop (allowed values: b, g)"),
    (["--repeats", "-1"], "--repeats must be >= 0"),
])
def test_cli_culprit_bad_input(tmp_path: Path, fake_cli: list[FakeRuntime],
                               capsys: pytest.CaptureFixture[str], extra: list[str],
                               message: str) -> None:
    make_matrix(tmp_path)
    main(["sweep", str(tmp_path / "m.yaml"), "--out", str(tmp_path / "r"), "-q"])
    capsys.readouterr()
    assert main(["culprit", str(tmp_path / "r" / "cul"), *extra]) == 2
    assert message in capsys.readouterr().err


def test_a_package_pip_put_back_is_said() -> None:
    image = ImageSpec("culprit-x", "python3", 1, pip=("multidict==6.4.4", "yarl==1.20.1"))
    result = dataclasses.replace(RESULT, fingerprint=Fingerprint(packages={
        "multidict": "6.4.4", "yarl": "1.20.1", "propcache": "0.5.4", "pip": "24.0"}))
    assert drift_of(image, result) == ("propcache 0.5.4",)
    bumped = dataclasses.replace(RESULT, fingerprint=Fingerprint(packages={
        "multidict": "6.5.0", "yarl": "1.20.1"}))
    assert drift_of(image, bumped) == ("multidict 6.5.0 (recipe 6.4.4)",)


@pytest.mark.parametrize(("probe", "b", "outcome"), [
    ("ok", "leak", "good"), ("plateau", "leak", "good"), ("leak", "leak", "bad"),
    ("regression", "leak", "untestable"), ("crash", "leak", "untestable"),
    ("crash", "crash", "bad"), ("unavailable", "leak", "untestable"),
    ("ambiguous", "leak", "untestable"), ("slowdown", "slowdown", "bad"),
])
def test_a_probe_is_bad_only_with_b_s_fault(probe: str, b: str, outcome: str) -> None:
    assert outcome_of(dataclasses.replace(RESULT, verdict=probe),
                      dataclasses.replace(RESULT, verdict=b)) == outcome


def read_clean(memory: str, verdict: str, rule: str) -> CellResult:
    """A probe with `verdict` and `rule` whose heap and RSS read `memory` (a kind)."""
    trend = MemoryTrend("heap", 300, 0.0, -1.0, 1.0, 0.0, 0.0, -1.0, 1.0, 1e6, 1e6, 1e6,
                        memory)   # type: ignore[arg-type]
    return dataclasses.replace(RESULT, verdict=verdict, rule=rule,
                               memory={"heap": trend, "rss": trend})


@pytest.mark.parametrize(("rule", "memory", "outcome"), [
    ("unsettled", "stable", "good"), ("one-run", "plateau", "good"),
    ("busy-host", "stable", "good"), ("suspected", "stable", "good"),
    ("unsettled", "ambiguous", "untestable"),
    ("filling", "ambiguous", "untestable"), ("creep", "stable", "untestable"),
])
def test_a_probe_undecided_about_time_alone_answers_a_leak(rule: str, memory: str,
                                                           outcome: str) -> None:
    """A loaded CI's probe of the good pin read `ambiguous (rule unsettled)`: its rounds
    against G left a slowdown open on a busy host, its heap stable. It was untestable,
    and the culprit named two packages where one leaks. B's fault is memory: a probe
    whose memory read clean has shown its absence, whatever its time."""
    probe = read_clean(memory, verdict="ambiguous", rule=rule)
    assert outcome_of(probe, dataclasses.replace(RESULT, verdict="leak")) == outcome
    # a slowdown's question is not answered by memory
    assert outcome_of(probe, dataclasses.replace(RESULT, verdict="slowdown")) == "untestable"


@pytest.mark.parametrize(("verdict", "memory", "outcome"), [
    ("regression", "stable", "good"), ("slowdown", "plateau", "good"),
    ("regression", "ambiguous", "untestable"), ("crash", "stable", "untestable"),
    ("timeout", "stable", "untestable"), ("oom", "stable", "bad"),
])
def test_a_probe_decided_on_time_alone_answers_a_leak(verdict: str, memory: str,
                                                      outcome: str) -> None:
    """A CI beside two busy loops (CI47): the Docker culprit's probe of B with only
    `leaky` put back read `regression: time 1.15x` against G, its heap +0.0 KiB/call.
    It was untestable, and the culprit named gamma beside leaky. B's fault is memory:
    a run that went to its end with its memory clean shows its absence, whatever its
    time; one cut short does not (a crash or timeout tells nothing; an OOM is a memory
    fault itself)."""
    probe = read_clean(memory, verdict=verdict, rule=verdict)
    assert outcome_of(probe, dataclasses.replace(RESULT, verdict="leak")) == outcome
    # a slowdown's question is not answered by memory: only a slowdown shows it
    assert outcome_of(probe, dataclasses.replace(RESULT, verdict="slowdown")) == (
        "bad" if verdict == "slowdown" else "untestable")


RECORDED = Path(__file__).parents[1] / "data" / "recorded"


def test_a_source_with_too_few_readings_does_not_make_a_probe_untestable() -> None:
    """A CI beside two busy loops: culprit's probes 3 and 5 of the Docker test
    (`test_docker_culprit_swaps_record_files`) both read `ambiguous (rule unsettled)`
    with heap, RSS and the cgroup stable; probe 5's USS, read rarely, had too few
    readings (`insufficient`). Probe 3 counted good, probe 5 untestable, and the culprit
    named gamma beside leaky. Their result.json files are kept here as recorded."""
    leak = dataclasses.replace(RESULT, verdict="leak")
    probes = [load_result(json.loads((RECORDED / f"culprit-busy-probe{n}" / "result.json")
                                     .read_text(encoding="utf-8"))) for n in (3, 5)]
    assert [p.rule for p in probes] == ["unsettled", "unsettled"]
    assert probes[1].memory["uss"].kind == "insufficient"
    assert [outcome_of(p, leak) for p in probes] == ["good", "good"]
    # AND a source read too few times is not a clean reading on its own
    trend = probes[1].memory["uss"]
    alone = dataclasses.replace(probes[1], memory={"uss": trend})
    assert outcome_of(alone, leak) == "untestable"


def test_swap_runs_both_hybrids_even_where_b_is_not_bad(tmp_path: Path) -> None:
    matrix = make_matrix(tmp_path)
    behave = leaks_when(lambda p: False)
    results, store = swept(tmp_path, matrix, behave)
    g, b = sorted(matrix.cells, key=lambda c: c.image.index)
    runtime = FakeRuntime(behave, pins_as_packages=True)
    sweep = Sweep(matrix, runtime, RunStore(store.root / "culprit"), lambda _: None)
    run = sweep_runner(sweep, g, results[g.id], SeriesCache(store.root)(g.id))
    out = culprit(g, results[g.id], b, results[b.id], run, lambda _: None, swap=["yarl"])
    assert out.not_bad and [(p.side, p.outcome) for p in out.probes] == [
        ("undo", "good"), ("apply", "good")]
    assert len(runtime.runs) == 2
    assert "; swapped anyway: B with yarl 1.9.4: ok" in out.sentence()
    with pytest.raises(ValueError, match="not a package change from g to b: numpy"):
        culprit(g, results[g.id], b, results[b.id], run, lambda _: None, swap=["numpy"])


def test_a_culprit_answer_outlives_no_cell_it_rests_on(
        tmp_path: Path, fake_cli: list[FakeRuntime], capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 35 item 1 for culprit's answer: once B runs again (its pin edited, then
    --resume), the reports say the answer is stale with the command that refreshes it,
    never the old cause beside the new cell."""
    make_matrix(tmp_path)
    out = tmp_path / "r"
    assert main(["sweep", str(tmp_path / "m.yaml"), "--out", str(out), "-q"]) == 1
    (run,) = (out / "cul").iterdir()
    assert main(["culprit", str(run), "-q"]) == 1
    capsys.readouterr()
    make_matrix(tmp_path, bad={**BAD_PINS, "idna": "3.9"})     # B's pins edited
    assert main(["sweep", str(tmp_path / "m.yaml"), "--out", str(out), "-q",
                 "--resume", str(run)]) == 1
    assert "cause: multidict" not in capsys.readouterr().out
    md = (run / "report.md").read_text()
    assert "stale: the cells it searched between changed since (b.cpu.loop)" in md
    assert "cause: multidict" not in md
    assert f"`harness culprit {run} cpu.loop` searches them again" in md
    assert main(["culprit", str(run), "cpu.loop", "-q"]) == 1   # the fix line works
    capsys.readouterr()
    assert main(["report", str(run)]) == 1
    assert "cpu.loop: cause: multidict 6.4.4 -> 6.6.3." in capsys.readouterr().out


def test_culprit_to_a_full_stdout_stops_saying_why_and_what_goes_on(
        tmp_path: Path, fake_cli: list[FakeRuntime],
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 42 item 8: `culprit > /dev/full` printed "harness: interrupted; " and nothing
    after it."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    make_matrix(tmp_path)
    assert main(["sweep", str(tmp_path / "m.yaml"), "--out", str(tmp_path / "r"), "-q"]) == 1
    capsys.readouterr()
    base = tmp_path / "r" / "cul"
    # WHEN culprit's stdout is a full device
    full = open("/dev/full", "w")   # noqa: SIM115 (its close may fail: the device is full)
    captured = sys.stdout
    sys.stdout = full
    try:
        code = main(["culprit", str(base), "-q"])
    finally:
        sys.stdout = captured
        with contextlib.suppress(OSError):
            full.close()
    err = capsys.readouterr().err
    # THEN it stops as an interruption, saying why and what the next command is ...
    assert code == 130, err
    said = err.strip().splitlines()[-1]
    assert said == ("harness: stopped: stdout could not be written (No space left on "
                    "device); finished probes are saved (run the same command again: it "
                    "reuses them)"), err
    # ... which works
    fake_cli.clear()
    assert main(["culprit", str(base), "-q"]) == 1
    assert "cause: multidict 6.4.4 -> 6.6.3" in capsys.readouterr().out


# ------------------------------------------------- the hybrid install strategy (issue 51)
def test_a_hybrid_the_resolver_refuses_goes_in_no_deps_and_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 51: corelib 2.0 pins corecore==2.0 exactly (as pydantic pins pydantic-core):
    B with corecore undone alone is a set of pins no resolver installs. A culprit hybrid
    goes in as listed (--no-deps), with why in its labels; a matrix image of the same
    pins is still refused."""
    from harness.runtimes import resolver
    from harness.runtimes.local import NO_DEPS, LocalRuntime, PinsRefused

    if resolver.uv_bin() is None:
        pytest.skip("uv is not installed")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    sweepkit.wheel(wheels, "corelib", "2.0", requires="corecore==2.0")
    for v in ("1.0", "2.0"):
        sweepkit.wheel(wheels, "corecore", v)
    monkeypatch.setenv("UV_NO_INDEX", "1")
    monkeypatch.setenv("UV_FIND_LINKS", str(wheels))
    monkeypatch.setenv("UV_OFFLINE", "1")
    runtime, said = LocalRuntime(tmp_path / "cache"), []
    pins = ("corecore==1.0", "corelib==2.0")
    plain = ImageSpec("b", "python3", 1, pip=pins, python=sys.executable)
    with pytest.raises(PinsRefused, match="corecore"):
        runtime.prepare(plain, said.append)
    info = runtime.prepare(dataclasses.replace(plain, hybrid=True), said.append)
    assert "corecore" in info.labels[NO_DEPS] and info.digest.endswith(f"-{NO_DEPS}")
    assert any("installing the pins as listed (--no-deps)" in s for s in said)
    found = subprocess.run([info.python, "-c", "import importlib.metadata as m; print("
                            "m.version('corelib'), m.version('corecore'))"],
                           capture_output=True, text=True, check=True).stdout.split()
    assert found == ["2.0", "1.0"]
    # built once: a second hybrid of these pins takes the same venv, and says why again
    again = LocalRuntime(tmp_path / "cache").prepare(dataclasses.replace(plain, hybrid=True),
                                                     said.append)
    assert again.python == info.python and again.labels[NO_DEPS] == info.labels[NO_DEPS]


def test_changes_no_hybrid_could_hold_apart_are_named_together_and_said(
        tmp_path: Path) -> None:
    """Issue 51: where every hybrid with only one of two changes is untestable (it cannot
    run even as listed), the answer names both and says they were not held apart."""
    def behave(c: Cell) -> Behaviour:
        p = set(c.image.pip)
        if ("multidict==6.6.3" in p) != ("yarl==1.20.1" in p):
            return Behaviour(error="ImportError: yarl and multidict are built together")
        return Behaviour(leak_per_iter=6000) if "multidict==6.6.3" in p else Behaviour()

    out, _, _ = search(tmp_path, behave)
    assert out.found and out.search is not None
    assert [c.name for c in out.search.answer] == ["multidict", "yarl"]
    assert ("Not held apart: no hybrid with only some of multidict, yarl could be tested "
            "(") in out.sentence()
    # one that was held apart says nothing of it
    (tmp_path / "alone").mkdir()
    alone, _, _ = search(tmp_path / "alone", leaks_when(lambda p: "multidict==6.6.3" in p))
    assert "Not held apart" not in alone.sentence()


def _swept_and_day_searched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A dated row (`other` moves on 2024-09-05, then a and b on 09-18; b 2.0 leaks)
    swept on the fake index and searched by `harness day`: the run's directory."""
    from fakeruntime import DatedIndex
    from sweepkit import on_the_cli, write_matrix

    def history(day: str) -> dict[str, str]:
        late = day >= "2024-09-18"
        return {"a": "2.0" if late else "1.0", "b": "2.0" if late else "1.0",
                "other": "2" if day >= "2024-09-05" else "1"}

    # patched where they are used: the day search and the resolver
    monkeypatch.setattr("harness.days.search.upload_time", lambda name, version: None)
    for where in ("harness.days.search", "harness.runtimes.resolver"):
        monkeypatch.setattr(f"{where}.yanked_releases", lambda name: {})
    on_the_cli(monkeypatch, DatedIndex(
        tmp_path / "cache", history, leaks_when(lambda p: "b==2.0" in p),
        {("a", v): {"b": v} for v in ("1.0", "2.0")}))
    matrix = write_matrix(tmp_path, [{"name": "app", "python": "python3", "pip": ["a"],
                                      "as_of": ["2024-09-01", "2024-10-01"]}],
                          gpus=["none"], name="d")
    assert main(["sweep", str(matrix), "--out", str(tmp_path / "r"), "-q"]) == 1
    (run,) = (tmp_path / "r" / "d").iterdir()
    assert main(["day", str(run), "-q"]) == 1
    return run


def test_culprit_after_harness_day_searches_the_days_it_found(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 51: `harness culprit` on a dated row that `harness day` searched takes the
    last good and first bad day's runs (as --find-cause does), not the axis's ends;
    --good/--bad search the two images named."""
    run = _swept_and_day_searched(tmp_path, monkeypatch)
    assert main(["culprit", str(run), "cpu.loop", "-q"]) == 1
    found = json.loads((run / "culprit" / "cpu.loop" / "culprit.json").read_text())
    assert found["good"] == "app@2024-09-16.cpu.loop"    # the day search's probe
    assert [c["name"] for c in found["difference"]["packages"]] == ["a", "b"]
    assert [c["name"] for c in found["answer"]] == ["b"]
    assert main(["culprit", str(run), "cpu.loop", "--good", "app@2024-09-01", "--bad",
                 "app@2024-10-01", "-q"]) == 1
    given = json.loads((run / "culprit" / "cpu.loop" / "culprit.json").read_text())
    assert given["good"] == "app@2024-09-01.cpu.loop"
    assert [c["name"] for c in given["difference"]["packages"]] == ["a", "b", "other"]
    assert [c["name"] for c in given["answer"]] == ["b"]


def test_a_good_day_left_undecided_on_its_steps_alone_is_still_the_good_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The day search reads a probe undecided on its step time alone, with its memory
    stable, as good (`answers.search.free_of`); culprit takes that day as its good end
    too. (A CI beside two busy loops: the good day's probe read `unsettled`, and the
    --find-cause culprit fell back to the sweep's images, 7 probes for 2.)"""
    run = _swept_and_day_searched(tmp_path, monkeypatch)
    # the good day's probe as a busy host leaves it: undecided on its steps, memory stable
    (probe,) = run.glob("day/cpu.loop/cells/app@2024-09-16.cpu.loop/result.json")
    data = json.loads(probe.read_text())
    assert data["verdict"] == "ok" and data["memory"], data["verdict"]
    assert all(m["kind"] in ("stable", "plateau") for m in data["memory"].values())
    probe.write_text(json.dumps({**data, "verdict": "ambiguous", "rule": "unsettled"}))
    assert main(["culprit", str(run), "cpu.loop", "-q"]) == 1
    found = json.loads((run / "culprit" / "cpu.loop" / "culprit.json").read_text())
    assert found["good"] == "app@2024-09-16.cpu.loop", found["good"]
    assert [c["name"] for c in found["answer"]] == ["b"]
