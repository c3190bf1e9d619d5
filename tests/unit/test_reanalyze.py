"""`harness report DIR --reanalyze`: recorded runs decided again, nothing rewritten.

The directories are real sweeps on an H100 (tests/data/h100, see its README).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import threading
from pathlib import Path

import pytest

from harness.analysis.sequential import LiveDecider, replay_live, watch_file
from harness.cli import main
from harness.errors import SpecError
from harness.matrixfile.load import analysis_of
from harness.protocol.ingest import read_samples
from harness.thresholds import AnalysisConfig

H100 = Path(__file__).resolve().parents[1] / "data" / "h100"


@pytest.fixture
def live_dir(tmp_path: Path) -> Path:
    return Path(shutil.copytree(H100 / "gpu-live", tmp_path / "gpu-live"))


@pytest.fixture
def real_dir(tmp_path: Path) -> Path:
    return Path(shutil.copytree(H100 / "gpu-real", tmp_path / "gpu-real"))


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_reanalyze_prints_the_table_and_writes_nothing(
        real_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = digest(real_dir)
    code = main(["report", str(real_dir), "--reanalyze"])
    out = capsys.readouterr().out
    assert code == 1                       # leaks are in it: the sweep's exit code
    assert "gpu0.gpu_leak" in out and "re-decided 7 cells" in out
    assert "nothing written" in out
    assert digest(real_dir) == before
    assert [p.name for p in real_dir.parent.iterdir()] == ["gpu-real"]


def test_write_makes_a_new_directory_beside_the_old(
        live_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = digest(live_dir)
    assert main(["report", str(live_dir), "--reanalyze", "--write"]) == 1
    out = live_dir.with_name("gpu-live-reanalyzed")
    assert f"written: {out}" in capsys.readouterr().out
    assert digest(live_dir) == before
    for cell in (live_dir / "cells").iterdir():
        new = out / "cells" / cell.name
        assert (new / "samples.jsonl").read_bytes() == (cell / "samples.jsonl").read_bytes()
        assert json.loads((new / "result.json").read_text())["id"] == cell.name
        assert not (new / "stop").exists()
    assert {"results.json", "report.md", "report.html", "junit.xml"} <= {
        p.name for p in out.iterdir()}
    # A second --write never reuses the first copy.
    assert main(["report", str(live_dir), "--reanalyze", "--write"]) == 1
    assert live_dir.with_name("gpu-live-reanalyzed-2").is_dir()
    assert main(["report", str(out)]) == 1      # the copy is a results directory


def test_set_changes_the_thresholds_the_cells_are_decided_with(
        real_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Floors (total and per call) far above any growth recorded: no cell can be a leak.
    code = main(["report", str(real_dir), "--reanalyze",
                 "--set", "analysis.heap_floor_bytes=1000000000000",
                 "--set", "analysis.leak-floor-bytes=1000000000000",
                 "--set", "analysis.live_floor_bytes=1000000000000"])
    out = capsys.readouterr().out
    assert "torch.gpu0.gpu_leak: leak -> " in out
    assert "leak:" not in out.split("re-decided")[0]
    assert code == 1                       # the slowdown is still found


@pytest.mark.parametrize(("override", "said"), [
    ("analysis.alpah=0.2", "did you mean analysis.alpha?"),
    ("alpha=0.2", "expected analysis.KEY=VALUE"),
    ("analysis.alpha=7", "outside the allowed range"),
    ("analysis.alpha=fast", "must be a float"),
])
def test_a_bad_override_is_named(real_dir: Path, override: str, said: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(real_dir), "--reanalyze", "--set", override]) == 2
    err = capsys.readouterr().err
    assert said in err and "--set" in err and "Traceback" not in err


@pytest.mark.parametrize("override", ["analysis.alpha=fast", "analysis.fill_share=many",
                                      "analysis.leak-floor-bytes=big"])
def test_a_bad_overrides_fix_line_is_a_set_that_is_accepted(
        real_dir: Path, override: str, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a --set whose value is of the wrong type
    assert main(["report", str(real_dir), "--reanalyze", "--set", override]) == 2
    err = capsys.readouterr().err
    # THEN its fix line is a --set (not a YAML line), and run as written it is accepted
    fix = re.search(r"fix: e\.g\. --set (analysis\.\S+)", err)
    assert fix is not None, err
    assert main(["report", str(real_dir), "--reanalyze", "--set", fix.group(1)]) != 2, (
        capsys.readouterr().err)


def test_set_and_write_need_reanalyze(real_dir: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    before = digest(real_dir)
    assert main(["report", str(real_dir), "--write"]) == 2
    assert "--reanalyze" in capsys.readouterr().err
    assert digest(real_dir) == before


def test_matrix_analysis_block_is_read_and_overridden(tmp_path: Path) -> None:
    (tmp_path / "matrix.yaml").write_text("name: x\nanalysis: {alpha: 0.01, min-ratio: 1.2}\n")
    cfg = analysis_of(tmp_path / "matrix.yaml", ["analysis.min_ratio=1.5"])
    assert (cfg.alpha, cfg.min_ratio) == (0.01, 1.5)
    assert analysis_of(tmp_path / "missing.yaml") == AnalysisConfig()
    (tmp_path / "bad.yaml").write_text("analysis: {alpha: 2}\n")
    with pytest.raises(SpecError, match=r"bad\.yaml:1"):
        analysis_of(tmp_path / "bad.yaml", ["analysis.alpha=0.1"])


@pytest.mark.parametrize("cell", sorted(p.name for p in (H100 / "gpu-live" / "cells").iterdir()))
def test_replay_gives_the_decision_the_sweeps_watcher_gives(cell: str, tmp_path: Path) -> None:
    """Fed in file order, the live decider decides as the sweep's file watcher does on
    the same finished file (today's code on both sides)."""
    cfg = AnalysisConfig()
    samples = H100 / "gpu-live" / "cells" / cell / "samples.jsonl"
    done = threading.Event()
    done.set()
    watched = watch_file(samples, LiveDecider(cfg, 50, 3000), tmp_path / "stop", done)
    replayed = replay_live(cfg, read_samples(samples), 50, 3000)
    assert replayed == watched.decision
    assert (replayed is None) == (not (tmp_path / "stop").exists())
