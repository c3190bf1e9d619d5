"""`harness compare` over `harness fit` directories (issue 24 point 4): both boundaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main


def fit_dir(root: Path, rows: list[dict[str, object]]) -> Path:
    root.mkdir(parents=True)
    (root / "fit.json").write_text(json.dumps({"param": "batch", "range": [1, 64],
                                               "rows": rows}))
    return root


def row(image: str, fits: int | None, host: str = "local", per_unit: float = 2**20 * 48
        ) -> dict[str, object]:
    return {"image": image, "scenario": "conv", "gpu": "gpu0", "host": host,
            "max_fit": fits, "prediction": {"source": "rss_anon"},
            "memory": {"rss_anon": {"per_unit": per_unit, "fixed": 2**28}}}


def test_two_fit_directories_show_both_boundaries(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = fit_dir(tmp_path / "a" / "fit-batch", [row("20.12", 16), row("22.12", 16)])
    b = fit_dir(tmp_path / "b" / "fit-batch",
                [row("20.12", 16), row("22.12", 8, per_unit=2**20 * 96)])
    assert main(["compare", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "conv with 22.12 on gpu0: fits batch=16 on" in out and ", 8 on " in out
    assert "rss_anon 96.0 MiB per batch" in out
    same = fit_dir(tmp_path / "c" / "fit-batch", [row("20.12", 17), row("22.12", 15)])
    assert main(["compare", str(a), str(same)]) == 0    # within one step: the same
    assert "the same boundary on both sides" in capsys.readouterr().out


def test_one_fit_over_two_hosts_compares_them(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    d = fit_dir(tmp_path / "fit-batch", [row("22.12", 16, "h3090"), row("22.12", 7, "h4090")])
    assert main(["compare", str(d)]) == 1
    assert "fits batch=16 on h3090, 7 on h4090" in capsys.readouterr().out
    assert main(["compare", str(d), "--host", "h4090", "--host", "h3090"]) == 0
    assert main(["compare", str(d), "--host", "h5090", "--host", "h3090"]) == 2
