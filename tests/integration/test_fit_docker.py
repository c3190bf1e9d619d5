"""`harness fit` through the real engine: boundaries under a docker `mem_limit`.

Needs the offline TF CPU images (`python -m harness images build tf-2.12 tf-2.21`):
NumPy 1.23 in 2.12.0, NumPy 2 in 2.21.0. scenarios/promote_alloc.py holds twice the
bytes per unit under NumPy 2 (NEP 50), so 2.21.0 is named first smaller; the conv net
of seed 004 (scenarios/conv_alloc.py) is fitted under 1 GiB on one image.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from harness.cli import main

pytestmark = [pytest.mark.docker, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def fit_json(out: Path, name: str) -> dict:
    data: dict = json.loads((out / name / "fit-batch" / "fit.json").read_text())
    return data


def test_numpy_2_image_fits_a_smaller_batch(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(ROOT / "examples" / "fit-promote.yaml", tmp_path / "m.yaml")
    (tmp_path / "m.yaml").write_text((tmp_path / "m.yaml").read_text().replace(
        "../scenarios/", f"{ROOT / 'scenarios'}/"))
    code = main(["fit", str(tmp_path / "m.yaml"), "--out", str(tmp_path / "out"), "-q"])
    out = capsys.readouterr().out
    data = fit_json(tmp_path / "out", "fit-promote")
    old, new = data["rows"]
    assert code == 1, out
    assert data["first_smaller"][0]["image"] == "2.21.0"
    assert "first smaller: 2.21.0" in out
    # 512 MiB / (16 MiB in + 16 MiB out) vs / (16 + 32): about 15 and 10
    assert 12 <= old["max_fit"] <= 16 and 8 <= new["max_fit"] <= 11
    assert old["memory"]["rss_anon"]["per_unit"] == pytest.approx(32 << 20, rel=0.15)
    assert new["memory"]["rss_anon"]["per_unit"] == pytest.approx(48 << 20, rel=0.15)
    for row in (old, new):
        assert row["runs"] <= row["bound"] == 9
        assert row["failure"]["verdict"] == "oom"
        assert abs(row["prediction"]["error"]) <= 0.10


def test_conv_net_boundary_under_one_gib(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    m = (ROOT / "examples" / "fit-conv.yaml").read_text().replace(
        "../scenarios/", f"{ROOT / 'scenarios'}/").replace(
        "    - harness-test/tf-cpu:2.21.0\n", "")
    (tmp_path / "m.yaml").write_text(m)
    code = main(["fit", str(tmp_path / "m.yaml"), "--out", str(tmp_path / "out"), "-q"])
    assert code == 0, capsys.readouterr().out
    (row,) = fit_json(tmp_path / "out", "fit-conv")["rows"]
    # measured by hand on this engine: batch 16 runs, 17 is OOM-killed (one step of noise)
    assert 15 <= row["max_fit"] <= 17
    assert row["runs"] <= row["bound"]
    pred = row["prediction"]
    assert pred["source"] == "rss_anon" and abs(pred["error"]) <= 0.10
    assert math.isclose(pred["limit"], 1 << 30)
