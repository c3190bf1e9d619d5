"""Every answer from the cells it names: a stored cell is reused only when the run that
made it is the run asked for now (its key), and each command reads only the results
directories of the kind it understands."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import sweepkit
from fakeruntime import Behaviour, FakeRuntime

from harness import matrixfile
from harness.cli import main
from harness.matrixfile.model import Cell
from harness.result.runkey import BEFORE_KEYS, key_of, why_changed
from harness.store.runs import kind_of

SCENARIO = ("LEAK = {leak}\n\n\ndef setup(params):\n    return None\n\n\n"
            "def step(state):\n    pass\n")
MiB = 1 << 20


def write_matrix(tmp: Path, pins: list[str], **top: Any) -> Path:
    return sweepkit.write_matrix(
        tmp, [{"name": label, "pip": [pin]} for label, pin in zip(("a", "b", "c"), pins,
                                                                   strict=True)],
        name="keys", defaults={**sweepkit.DEFAULTS, "iterations": 200}, **top)


def leaky_sweep(tmp: Path) -> tuple[Path, Path]:
    """`harness sweep` (over the fake runtime) of a matrix whose b and c leak: the
    matrix and the run directory."""
    (tmp / "loop.py").write_text(SCENARIO.format(leak=True))
    m = write_matrix(tmp, ["demo==1.0", "demo==1.1", "demo==1.2"])
    assert main(["sweep", str(m), "--out", str(tmp / "r"), "-q"]) == 1
    [run] = list((tmp / "r" / "keys").iterdir())
    return m, run


def leaks(cell: Cell) -> Behaviour:
    """The truth the fake runtime states: an image leaks when it is pinned to a demo
    newer than 1.0 and the scenario file says LEAK = True (read as it is now)."""
    newer = cell.image.pip != ("demo==1.0",)
    scenario_leaks = "LEAK = True" in cell.scenario.script.read_text()
    return Behaviour(leak_per_iter=16384) if newer and scenario_leaks else Behaviour()


@pytest.fixture
def fake_cli(monkeypatch: pytest.MonkeyPatch) -> list[FakeRuntime]:
    made: list[FakeRuntime] = []

    def get_runtime(name: str, docker_host: str | None = None) -> FakeRuntime:
        made.append(FakeRuntime(leaks))
        return made[-1]

    monkeypatch.setattr("harness.runtimes.get_runtime", get_runtime)
    return made


@pytest.fixture
def bisected(tmp_path: Path, fake_cli: list[FakeRuntime],
             capsys: pytest.CaptureFixture[str]) -> list[str]:
    """A first bisect of a..c: b is the first bad; the argv to bisect again."""
    (tmp_path / "loop.py").write_text(SCENARIO.format(leak=True))
    m = write_matrix(tmp_path, ["demo==1.0", "demo==1.1", "demo==1.2"])
    argv = ["bisect", str(m), "--out", str(tmp_path / "r"), "-q"]
    assert main(argv) == 1
    assert "gpu0.loop: first bad: b (last good: a)" in capsys.readouterr().out
    assert len(fake_cli[0].runs) == 3
    return argv


def test_bisect_after_changed_pins_runs_again(tmp_path: Path, bisected: list[str],
                                              fake_cli: list[FakeRuntime],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the later images pinned to the good version now
    write_matrix(tmp_path, ["demo==1.0", "demo==1.0", "demo==1.0"])
    # WHEN bisected again (without -q: each probe said)
    code = main([a for a in bisected if a != "-q"])
    out = capsys.readouterr().out
    # THEN the changed images run again, said why, and the answer is no bad image
    assert "c: pins changed since it ran (demo==1.2 -> demo==1.0); running it again" in out
    assert "first bad" not in out
    assert "no bad image: the last image c is ok" in out
    assert code == 2
    assert fake_cli[1].runs == ["c.gpu0.loop.attempt-2"]    # beside the first run
    # AND the unchanged image is reused, and where from is said
    assert "endpoint a [1/3, cached]: ok" in out
    assert re.search(r"1 cell run\(s\), 1 reused \(1 from .*bisect-gpu0\.loop\)", out), out


def test_bisect_after_an_edited_scenario_runs_again(tmp_path: Path, bisected: list[str],
                                                    fake_cli: list[FakeRuntime],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "loop.py").write_text(SCENARIO.format(leak=False))
    assert main(bisected) == 2
    out = capsys.readouterr().out
    assert "a: scenario file changed since it ran; running it again" in out
    assert "first bad" not in out and "no bad image: the last image c is ok" in out
    assert sorted(fake_cli[1].runs) == ["a.gpu0.loop.attempt-2", "c.gpu0.loop.attempt-2"]


def test_bisect_with_other_iterations_runs_again(bisected: list[str],
                                                 fake_cli: list[FakeRuntime],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*bisected, "--iterations", "150"]) == 1
    out = capsys.readouterr().out
    assert ("a: run settings changed since it ran (iterations 200 -> 150); running it "
            "again") in out
    assert len(fake_cli[1].runs) == 3 and "3 cell run(s), 0 reused" in out


def test_a_result_without_a_key_is_run_again(tmp_path: Path, bisected: list[str],
                                             fake_cli: list[FakeRuntime],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the results as an older harness wrote them: no key
    for path in (tmp_path / "r").glob("keys/bisect-*/cells/*/result.json"):
        data = json.loads(path.read_text())
        del data["key"]
        path.write_text(json.dumps(data))
    assert main(bisected) == 1
    out = capsys.readouterr().out
    assert f"a: {BEFORE_KEYS}; running it again" in out
    assert len(fake_cli[1].runs) == 3


def test_the_key_names_the_part_that_changed(tmp_path: Path) -> None:
    (tmp_path / "loop.py").write_text("import helper\n" + SCENARIO.format(leak=True))
    (tmp_path / "helper.py").write_text("X = 1\n")
    m = matrixfile.load(write_matrix(tmp_path, ["demo==1.0", "demo==1.1", "demo==1.2"]))
    cell = m.cells[0]
    key = key_of(cell, "local")
    assert why_changed(key, key_of(cell, "local")) is None
    assert why_changed(None, key) == BEFORE_KEYS
    # a module of the scenario's own directory that it imports is part of it
    (tmp_path / "helper.py").write_text("X = 2\n")
    assert why_changed(key, key_of(cell, "local")) == "scenario file changed since it ran"
    assert why_changed(key, key_of(cell, "docker")) == (
        "scenario file, runtime changed since it ran (local -> docker)")


def test_sweep_resume_after_a_bisect_resumes_the_sweep(
        tmp_path: Path, fake_cli: list[FakeRuntime],
        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a sweep of the matrix, then a bisect of it (its directory beside the sweep's)
    (tmp_path / "loop.py").write_text(SCENARIO.format(leak=True))
    m = write_matrix(tmp_path, ["demo==1.0", "demo==1.1", "demo==1.2"])
    out = tmp_path / "r"
    assert main(["sweep", str(m), "--out", str(out), "-q", "-k", "a"]) == 0
    [sweep_dir] = [p for p in (out / "keys").iterdir()]
    assert main(["bisect", str(m), "--out", str(out), "-q"]) == 1
    assert kind_of(sweep_dir) == "sweep" and kind_of(out / "keys" / "bisect-gpu0.loop") == \
        "bisect"
    capsys.readouterr()
    # WHEN the sweep is resumed
    assert main(["sweep", str(m), "--out", str(out), "--resume"]) == 1
    captured = capsys.readouterr()
    # THEN it continues the sweep's directory, not the bisect's
    assert f"resume: 1 finished cell reused from {sweep_dir.absolute()}, 2 to run" in \
        captured.err
    assert f"results: {sweep_dir.absolute()}" in captured.out
    assert not (out / "keys" / "bisect-gpu0.loop" / "report.md").exists()
    # AND a sweep resumed with a changed pin runs that cell again, said why
    write_matrix(tmp_path, ["demo==1.0", "demo==1.0", "demo==1.2"])
    assert main(["sweep", str(m), "--out", str(out), "--resume", str(sweep_dir)]) == 1
    err = capsys.readouterr().err
    assert ("resume: b.gpu0.loop: pins changed since it ran (demo==1.1 -> demo==1.0); "
            "running it again") in err
    assert fake_cli[-1].runs == ["b.gpu0.loop"]


def test_report_and_explain_refuse_a_bisect_directory(
        tmp_path: Path, bisected: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    bdir = tmp_path / "r" / "keys" / "bisect-gpu0.loop"
    before = sorted(p.name for p in bdir.iterdir())
    for command in ("report", "explain", "compare"):
        assert main([command, str(bdir)]) == 2
        err = capsys.readouterr().err
        assert f"a bisect directory, which harness {command} does not read" in err, err
        assert "read it with harness bisect" in err
    # `reports/<name>` holds only the bisect: no sweep to take as the newest
    assert main(["report", str(tmp_path / "r" / "keys")]) == 2
    assert "not a results directory" in capsys.readouterr().err
    assert sorted(p.name for p in bdir.iterdir()) == before


def test_report_of_a_folder_that_is_not_a_results_directory_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a checkout: a matrix.yaml, a scenario, no results
    (tmp_path / "loop.py").write_text(SCENARIO.format(leak=True))
    write_matrix(tmp_path, ["demo==1.0", "demo==1.1", "demo==1.2"]).rename(
        tmp_path / "matrix.yaml")
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a results directory" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def write_fit_matrix(tmp: Path, per_unit: int) -> Path:
    (tmp / "net.py").write_text(f"PER_UNIT_MIB = {per_unit}\n\n\ndef setup(params):\n"
                                "    return None\n\n\ndef step(state):\n    pass\n")
    (tmp / "m.yaml").write_text(
        "name: fitk\nruntime: local\n"
        "defaults: {iterations: 40, warmup: 5, sample_every: 2, repeats: 2, mem_limit: 1g}\n"
        "matrix:\n  image: [{name: v0}]\n  gpu: [none]\n"
        "  scenario: [{script: net.py, params: {batch: 1}}]\n"
        "fit: {param: batch, range: 1..32}\n")
    return tmp / "m.yaml"


def by_scenario(cell: Cell) -> Behaviour:
    """Peak: 300 MiB + PER_UNIT_MIB (read from the scenario file now) per batch; over
    1 GiB the cell is OOM-killed."""
    text = cell.scenario.script.read_text()
    per_unit = int(text.split("PER_UNIT_MIB = ")[1].split()[0])
    peak = 300 * MiB + per_unit * MiB * int(cell.scenario.params["batch"])
    return Behaviour(base_bytes=peak, oom=peak > 1 << 30)


def test_fit_probes_run_again_when_their_key_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    made: list[FakeRuntime] = []

    def get_runtime(name: str, docker_host: str | None = None) -> FakeRuntime:
        made.append(FakeRuntime(by_scenario))
        return made[-1]

    monkeypatch.setattr("harness.runtimes.get_runtime", get_runtime)
    argv = ["fit", str(write_fit_matrix(tmp_path, 50)), "--out", str(tmp_path / "r"), "-q"]
    assert main(argv) == 0
    assert "fits 14 (15: oom)" in capsys.readouterr().out
    # the same run again: every probe reused, and where from is said
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert made[1].runs == [] and "fits 14 (15: oom)" in out
    assert re.search(r"probe\(s\) reused from .*fit-batch, 0 run", out), out
    # WHEN the scenario needs more memory per unit THEN its probes run again
    write_fit_matrix(tmp_path, 70)
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "v0.cpu.net.batch1: scenario file changed since it ran; running it again" in out
    assert made[2].runs and "fits 10 (11: oom)" in out
    assert kind_of(tmp_path / "r" / "fitk" / "fit-batch") == "fit"


def test_report_refuses_a_fit_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("harness.runtimes.get_runtime",
                        lambda name, docker_host=None: FakeRuntime(by_scenario))
    assert main(["fit", str(write_fit_matrix(tmp_path, 50)), "--out",
                 str(tmp_path / "r"), "-q"]) == 0
    fdir = tmp_path / "r" / "fitk" / "fit-batch"
    before = sorted(p.name for p in fdir.iterdir())
    capsys.readouterr()
    for command in ("report", "explain"):
        assert main([command, str(fdir)]) == 2
        err = capsys.readouterr().err
        assert f"a fit directory, which harness {command} does not read" in err, err
        assert "read it with harness compare" in err
    assert sorted(p.name for p in fdir.iterdir()) == before




def test_explain_leaves_out_a_pair_whose_scenario_changed(
        tmp_path: Path, fake_cli: list[FakeRuntime],
        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a sweep where b leaks first (a is the last good)
    m, run = leaky_sweep(tmp_path)
    # WHEN the scenario is edited and the sweep explained
    (tmp_path / "loop.py").write_text(SCENARIO.format(leak=False))
    capsys.readouterr()
    code = main(["explain", str(run), "-q"])
    err = capsys.readouterr().err
    # THEN no verdict of the old scenario is explained with the new one: said, exit 4
    assert code == 4, err
    assert "not explained: b.gpu0.loop: scenario file changed since it ran" in err
    assert f"fix: harness sweep {m} --resume {run} runs it again" in err
    assert fake_cli[-1].attributed == []
    # AND with the scenario as it ran, the pair is explained, its runs in explain/,
    # which reads only through the sweep's report
    (tmp_path / "loop.py").write_text(SCENARIO.format(leak=True))
    assert main(["explain", str(run), "-q"]) == 0
    assert sorted(c for c, *_ in fake_cli[-1].attributed) == ["a.gpu0.loop", "b.gpu0.loop"]
    assert kind_of(run / "explain") == "explain"
    capsys.readouterr()
    assert main(["report", str(run / "explain")]) == 2
    assert "read it with harness report on the sweep directory" in capsys.readouterr().err


def test_a_reanalyzed_copy_is_a_results_directory_of_its_kind(
        tmp_path: Path, fake_cli: list[FakeRuntime],
        capsys: pytest.CaptureFixture[str]) -> None:
    m, run = leaky_sweep(tmp_path)
    assert main(["report", str(run), "--reanalyze", "--write"]) == 1
    copy = run.with_name(run.name + "-reanalyzed")
    assert kind_of(copy) == "reanalyzed"
    # read as a sweep's results, and not resumed as a sweep
    capsys.readouterr()
    assert main(["report", str(copy)]) == 1
    assert "gpu0.loop: first bad: b" in capsys.readouterr().out
    assert main(["sweep", str(m), "--out", str(tmp_path / "r"), "--resume", str(copy)]) == 2
    assert "a reanalyzed directory, which --resume does not read" in capsys.readouterr().err


def test_resume_continues_only_a_sweep_of_the_same_matrix(tmp_path: Path) -> None:
    from harness.errors import InputError
    from harness.store import RunStore

    # GIVEN two sweeps of "keys" (the later one started later) and one of another matrix
    older = RunStore(tmp_path / "keys" / "b-older")
    older.mark("sweep", "keys", "m.yaml", started=200.0)
    newer = RunStore(tmp_path / "keys" / "a-newer")
    newer.mark("sweep", "keys", "m.yaml", started=300.0)
    for run in (older, newer):     # each with a finished cell (debris is never the newest)
        run.write("cells/c/result.json", "{}")
    RunStore(tmp_path / "keys" / "bisect-gpu0.loop").mark("bisect", "keys", "m.yaml",
                                                          started=400.0)
    other = RunStore(tmp_path / "other" / "x")
    other.mark("sweep", "other", "o.yaml")
    # THEN --resume takes the newest sweep by recorded time, not by name
    store = RunStore.open(tmp_path, "keys", True)
    store.unlock()
    assert store.root == newer.root
    # AND refuses a sweep of another matrix, naming it
    with pytest.raises(InputError, match="a sweep of the matrix 'other', not 'keys'"):
        RunStore.open(tmp_path, "keys", other.root)


def test_older_directories_are_told_by_what_they_hold(tmp_path: Path) -> None:
    # a matrix named like a fit's directory: its folder of runs is no results directory
    (tmp_path / "fit-conv" / "20260101-000000" / "cells").mkdir(parents=True)
    assert kind_of(tmp_path / "fit-conv") is None
    assert kind_of(tmp_path / "fit-conv" / "20260101-000000") == "sweep"
    (tmp_path / "fit-conv" / "fit-batch" / "cells").mkdir(parents=True)
    assert kind_of(tmp_path / "fit-conv" / "fit-batch") == "fit"
    (tmp_path / "n" / "bisect-gpu0.loop" / "cells").mkdir(parents=True)
    assert kind_of(tmp_path / "n" / "bisect-gpu0.loop") == "bisect"
    # a plan.json without a kind: a sweep's
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "plan.json").write_text('{"cells": [], "matrix": "m.yaml"}')
    assert kind_of(tmp_path / "old") == "sweep"
    assert kind_of(tmp_path) is None


def test_sources_are_parsed_one_thread_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """CPython 3.11 before 3.11.8 raises SystemError when two threads build ASTs at once
    (gh-106905; a CI run's simulated-host sweep hit it): every host-side parse goes
    through `parse_source`, which takes them one at a time."""
    import ast
    import threading
    import time

    from harness.result import runkey

    inside, most = [0], [0]
    real = ast.parse

    def slow_parse(*args: object, **kwargs: object) -> ast.Module:
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.01)
        inside[0] -= 1
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ast, "parse", slow_parse)
    threads = [threading.Thread(target=runkey.parse_source, args=(b"import os\n",))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1
