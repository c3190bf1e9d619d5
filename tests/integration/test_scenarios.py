"""Each seed scenario runs for a few iterations under the agent in its image, through
the real engine. Needs the offline CPU images (`python -m harness images build`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main

# slow: each cell starts a TensorFlow (or OpenCV/ORT) container, 25-35 s a test in CI
pytestmark = [pytest.mark.docker, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
TF = "harness-test/tf-cpu:2.21.0"
TF_OLD = "harness-test/tf-cpu:2.12.0"
LIBS = "harness-test/libs:latest"


def sweep(tmp_path: Path, image: str, scenarios: str, iterations: int = 40,
          timed: bool = False) -> dict[str, dict]:
    """The scenarios' cells swept in `image`. Not `timed`: `heap: stock` without
    PYTHONMALLOC, so no second agent times the steps under the user's allocator (a
    second TensorFlow import a cell); these cells are read for what ran, not its time.
    `timed`: harness's defaults, the time per call as a user's run reports it (a 20-call
    run's own step time alone can read 0 on a busy host, where the run-queue delay met
    took each interval's steps: a CI beside two busy loops)."""
    heap = "" if timed else ",\n           heap: stock, pythonmalloc: false"
    m = tmp_path / "m.yaml"
    m.write_text(f"""
name: scen
runtime: docker
defaults: {{iterations: {iterations}, warmup: 5, sample_every: 5, timeout: 5m, repeats: 0{heap}}}
matrix:
  image: [{image}]
  gpu: [none]
  scenario:
{scenarios}
""")
    main(["sweep", str(m), "--out", str(tmp_path / "out"), "-q"])
    files = list((tmp_path / "out").glob("scen/*/results.json"))
    assert len(files) == 1
    cells: dict[str, dict] = json.loads(files[0].read_text())["cells"]
    return cells


def ran(cell: dict) -> dict:
    assert cell["verdict"] not in ("crash", "timeout", "oom"), cell["reason"]
    assert cell["end"]["status"] == "ok"
    assert cell["summary"]["iterations"] > 0
    info: dict = cell["end"]["info"]
    return info


@pytest.mark.parametrize("image", [TF, TF_OLD])
def test_rfft_loop_runs_the_op_every_step(tmp_path: Path, image: str) -> None:
    s = ROOT / "scenarios" / "rfft_loop.py"
    cells = sweep(tmp_path, image, f"    - {s}\n"
                                   f"    - {{script: {s}, id: zeros, params: {{input: zeros}}}}\n"
                                   f"    - {{script: {s}, id: folded, params: {{input: zeros, "
                                   f"fold_constants: true}}}}")
    by_id = {c["scenario"]["id"]: c for c in cells.values()}
    assert ran(by_id["rfft_loop"])["op_ran"] is True
    assert ran(by_id["zeros"])["op_ran"] is True       # folding off: the op really runs
    assert ran(by_id["folded"])["op_ran"] is False     # grappler folded it to a constant
    assert ran(by_id["rfft_loop"])["tf_version"] == image.rsplit(":", 1)[1]


def test_tfdata_pipelines(tmp_path: Path) -> None:
    s = ROOT / "scenarios" / "tfdata_pipeline.py"
    pipelines = ("interleave", "parallel_reads", "range_index", "py_function")
    cells = sweep(tmp_path, TF, "".join(
        f"    - {{script: {s}, id: {p}, params: {{pipeline: {p}}}}}\n" for p in pipelines))
    assert len(cells) == len(pipelines)
    for cell in cells.values():
        ran(cell)


def test_resize_and_ort(tmp_path: Path) -> None:
    r = ROOT / "scenarios" / "resize_loop.py"
    o = ROOT / "scenarios" / "ort_session.py"
    cells = sweep(tmp_path, LIBS, f"    - {{script: {r}, id: skimage, iterations: 5}}\n"
                                  f"    - {{script: {r}, id: cv2, params: {{backend: cv2}}}}\n"
                                  f"    - {{script: {o}, id: ort_fixed}}\n"
                                  f"    - {{script: {o}, id: ort_session, "
                                  f"params: {{session_per_step: true}}}}\n", iterations=20,
                  timed=True)
    by_id = {c["scenario"]["id"]: c for c in cells.values()}
    for cell in by_id.values():
        ran(cell)
    # The seed's complaint: skimage resize is far slower than cv2.
    skimage, cv2 = (by_id[k]["summary"]["median_step_s"] for k in ("skimage", "cv2"))
    assert skimage and cv2, (by_id["skimage"]["summary"], by_id["cv2"]["summary"])
    assert skimage / cv2 > 10, (skimage, cv2)


def test_conv_alloc_runs_small_and_ooms_big(tmp_path: Path) -> None:
    c = ROOT / "scenarios" / "conv_alloc.py"
    cells = sweep(tmp_path, TF, f"    - {{script: {c}, id: small, iterations: 5}}\n"
                                f"    - {{script: {c}, id: big, mem-limit: 1g, iterations: 3, "
                                f"params: {{height: 720, width: 1280, batch: 2}}}}\n")
    by_id = {x["scenario"]["id"]: x for x in cells.values()}
    ran(by_id["small"])
    big = by_id["big"]
    assert big["verdict"] == "oom", big["reason"]
    assert big["outcome"]["exit_code"] == 137
    # The engine's stats were sampled while it ran (1 Hz: the climb to the limit itself
    # can fall between two readings, so OOMKilled, not the peak, is what decides).
    assert big["outcome"]["host_samples"] >= 1
    assert big["outcome"]["oom_killed"] is True
