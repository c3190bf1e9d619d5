"""`harness report DIR --reanalyze` of a directory nobody touched gives back every verdict
and figure the sweep gave (issue 35 item 2): re-deciding is a function of what was
recorded, confirmation rounds included; only what changed (`--set`) changes a verdict,
and the reason says which."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sweepkit
from fakeruntime import Behaviour

from harness.cli import main
from harness.matrixfile.model import Cell

CALLS = 400


def behave(cell: Cell) -> Behaviour:
    """v2's steps are 30 % slower in the sweep's own run (the pooled test says slower),
    never in its confirmation rounds (shorter runs: the rounds say no change); v3 leaks."""
    if cell.image.label == "v2" and cell.settings.iterations == CALLS:
        return Behaviour(step_s=0.0013)
    if cell.image.label == "v3":
        return Behaviour(leak_per_iter=16384)
    return Behaviour()


@pytest.fixture
def swept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
          capsys: pytest.CaptureFixture[str]) -> Path:
    sweepkit.on_the_cli(monkeypatch, behave)
    m = sweepkit.write_matrix(tmp_path, ["v1", "v2", "v3"], ["s.py"], name="pure",
                              gpus=["none"], defaults={**sweepkit.DEFAULTS,
                                                       "iterations": CALLS, "rounds": 3})
    assert main(["sweep", str(m), "-q", "--out", str(tmp_path / "r")]) == 1
    capsys.readouterr()
    [run] = list((tmp_path / "r" / "pure").iterdir())
    return run


def cells(run: Path) -> dict[str, dict[str, object]]:
    return {p.name: json.loads((p / "result.json").read_text())
            for p in sorted((run / "cells").iterdir())}


def test_an_untouched_directory_is_decided_again_as_it_was(
        swept: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = cells(swept)
    # GIVEN a good cell whose pooled steps said slower and whose rounds said no change
    v2 = before["v2.cpu.s"]
    assert v2["verdict"] == "ok"
    vs = v2["vs_baseline"]
    assert isinstance(vs, dict) and vs["confirmation"]["rounds"], vs
    # WHEN the untouched directory is decided again and written beside it
    assert main(["report", str(swept), "--reanalyze", "--write"]) == 1
    out = capsys.readouterr().out
    # THEN no verdict changed, and every cell's result.json is equal, field by field
    assert ": 0 verdict(s) changed" in out, out
    after = cells(swept.with_name(swept.name + "-reanalyzed"))
    assert set(after) == set(before)
    for cid, old in before.items():
        new = after[cid]
        differ = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        assert differ == [], (cid, differ)        # the whole result.json, every figure


def test_a_set_that_changes_a_verdict_says_so(
        swept: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["report", str(swept), "--reanalyze", "--set",
                 "analysis.leak-floor-bytes=1000000000000", "--set",
                 "analysis.heap_floor_bytes=1000000000000", "--set",
          "analysis.live_floor_bytes=1000000000000"])
    out = capsys.readouterr().out
    assert code == 0, out
    # AND the change says what made it: the --set, not harness's rules
    [line] = [x for x in out.splitlines() if "v3.cpu.s: leak -> ok" in x]
    assert line.endswith("; changed by --set analysis.leak-floor-bytes=1000000000000 "
                         "--set analysis.heap_floor_bytes=1000000000000 "
                         "--set analysis.live_floor_bytes=1000000000000"), line


def test_a_set_applies_where_the_row_baseline_samples_were_cut(
        swept: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the row baseline's samples cut short after the sweep (found by the model of
    # users' paths: the leak below kept its recorded verdict whatever --set said)
    samples = swept / "cells" / "v1.cpu.s" / "samples.jsonl"
    samples.write_bytes(samples.read_bytes()[: samples.stat().st_size // 2])
    # WHEN it is decided again with floors no growth reaches
    main(["report", str(swept), "--reanalyze", "--set",
          "analysis.leak-floor-bytes=1000000000000", "--set",
          "analysis.heap_floor_bytes=1000000000000", "--set",
          "analysis.live_floor_bytes=1000000000000"])
    out = capsys.readouterr().out
    # THEN the baseline is unreadable and the leak is no leak under the new floors
    assert "v1.cpu.s: ok -> unreadable" in out, out
    assert "v3.cpu.s: leak -> ok" in out, out
    # AND without --set, nothing but the cut cell changes
    main(["report", str(swept), "--reanalyze"])
    out = capsys.readouterr().out
    assert ": 1 verdict(s) changed:" in out and "v1.cpu.s: ok -> unreadable" in out, out


def test_a_change_without_set_is_said_to_be_harness_rules(
        swept: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN harness's rules changed since the sweep (here: its default leak floors)
    import dataclasses
    import importlib

    module = importlib.import_module("harness.reanalyze")
    real = module.analysis_of

    def later_rules(file: Path, overrides: object = ()) -> object:
        cfg = real(file, overrides)  # type: ignore[arg-type]
        return dataclasses.replace(cfg, leak_floor_bytes=10**12, heap_floor_bytes=10**12,
                                   live_floor_bytes=10**12)

    monkeypatch.setattr(module, "analysis_of", later_rules)
    main(["report", str(swept), "--reanalyze"])
    out = capsys.readouterr().out
    # THEN the changed verdict says harness's rules made it
    [line] = [x for x in out.splitlines() if "v3.cpu.s: leak -> ok" in x]
    assert line.endswith("changed by harness's rules: its analysis decides these samples "
                         "otherwise than when swept"), line


def test_a_written_copy_is_decided_again_as_it_was_written(
        swept: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a copy re-decided with --set and written (found by the model of users'
    # paths: deciding the copy again turned its verdicts back, "by harness's rules")
    main(["report", str(swept), "--reanalyze", "--write", "--set",
          "analysis.leak-floor-bytes=1000000000000", "--set",
          "analysis.heap_floor_bytes=1000000000000", "--set",
          "analysis.live_floor_bytes=1000000000000"])
    copy = swept.with_name(swept.name + "-reanalyzed")
    capsys.readouterr()
    # WHEN the untouched copy is decided again
    assert main(["report", str(copy), "--reanalyze"]) == 0
    # THEN nothing changes: it records the --set it was decided with
    out = capsys.readouterr().out
    assert ": 0 verdict(s) changed" in out, out
