"""`harness compare`: two FakeRuntime sweeps that differ in the GPU their header recorded."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sweepkit
from fakeruntime import Behaviour, FakeRuntime

from harness.cli import main
from harness.compare import compare_hosts, compare_images, side_names
from harness.matrixfile.model import Cell
from harness.runtimes.base import Progress, RunOutcome, RunRequest
from harness.store.gate import read_run
from tests.resultkit import as_results

RTX = {"3090": ("NVIDIA GeForce RTX 3090", [8, 6], "gpu-3090"),
       "4090": ("NVIDIA GeForce RTX 4090", [8, 9], "gpu-4090")}


@dataclass
class GpuFakeRuntime(FakeRuntime):
    """FakeRuntime whose header says which GPU and host the cell ran on."""

    gpu_name: str = ""
    cc: tuple[int, int] = (0, 0)
    host: str = ""

    def run(self, request: RunRequest, progress: Progress) -> RunOutcome:
        outcome = super().run(request, progress)
        path = request.outdir / "samples.jsonl"
        lines = path.read_text().splitlines()
        header = json.loads(lines[0])
        header["gpu"] = {"devices": [{"name": self.gpu_name, "cc": list(self.cc)}],
                         "driver": "535.104.05"}
        header["hostname"] = self.host
        path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
        return outcome


def swept(tmp: Path, card: str, behave: Callable[[Cell], Behaviour]) -> Path:
    name, cc, host = RTX[card]
    runtime = GpuFakeRuntime(behave, gpu_name=name, cc=(cc[0], cc[1]), host=host)
    return sweepkit.swept(tmp, ["20.12", "22.12"], runtime,
                          ["loop.py", {"script": "loop.py", "id": "zeros"}], name="cmp",
                          out=tmp / card).root


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """3090: all clean. 4090: 22.12 leaks in `loop`, the `zeros` scenario is clean."""
    tmp = tmp_path_factory.mktemp("hosts")
    a = swept(tmp, "3090", lambda c: Behaviour())
    b = swept(tmp, "4090", lambda c: Behaviour(leak_per_iter=16384)
              if c.image.label == "22.12" and c.scenario.id == "loop" else Behaviour())
    return a, b


def test_the_sentence_names_gpu_and_image(hosts: tuple[Path, Path]) -> None:
    a, b = hosts
    comparison = compare_hosts(read_run(a).results, read_run(b).results)
    assert (comparison.a_name, comparison.b_name) == ("RTX 3090", "RTX 4090")
    assert comparison.sentences() == [
        "loop leaks only on RTX 4090 with 22.12 (not on RTX 3090)"]
    assert [p.key for p in comparison.pairs if p.differs] == [("22.12", "loop")]
    assert len(comparison.joined) == 4


def test_render_marks_the_differing_pair(hosts: tuple[Path, Path]) -> None:
    out = io.StringIO()
    compare_hosts(read_run(hosts[0]).results, read_run(hosts[1]).results).render(out)
    lines = out.getvalue().splitlines()
    assert lines[0].split()[:4] == ["image", "scenario", "RTX", "3090"]
    marked = [ln for ln in lines if ln.startswith("*")]
    assert len(marked) == 1 and "22.12" in marked[0] and "leak: uss+rss +16.0 KiB/call" in marked[0]


def test_same_gpu_model_is_told_apart_by_hosts_label_never_container_hostname() -> None:
    def res(label: str, container: str) -> dict[str, Any]:
        return {"host": {"label": label, "url": "ssh://root@" + label},
                "runtime": "docker",
                "fingerprint": {"hostname": container, "gpu": {"devices": [
                    {"name": "NVIDIA GeForce RTX 3090"}]}}}

    assert side_names(as_results({"x": res("h1", "c85a0d351681")}),
                      as_results({"x": res("h2", "5dc5b2f5be21")}),
                      ("A", "B")) == ("RTX 3090 on h1", "RTX 3090 on h2")
    # the default engine: no label, so the results directory names each side
    unnamed = {"host": {"label": "local", "url": None, "machine": "m1"}, "runtime": "docker",
               "fingerprint": {"hostname": "c85a0d351681"}}
    other = {**unnamed, "fingerprint": {"hostname": "5dc5b2f5be21"}}
    assert side_names(as_results({"x": unnamed}), as_results({"x": other}),
                      ("n/t1", "n/t2")) == ("n/t1", "n/t2")
    assert side_names(as_results({"x": {}}), as_results({"x": {}}),
                      ("dirA", "dirB")) == ("dirA", "dirB")


def test_two_runs_on_one_machine_differ_between_runs(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    clean = swept(tmp_path / "one", "3090", lambda c: Behaviour())
    leaky = swept(tmp_path / "two", "3090", lambda c: Behaviour(leak_per_iter=16384)
                  if c.image.label == "22.12" and c.scenario.id == "loop" else Behaviour())
    assert main(["compare", str(clean), str(leaky)]) == 1
    out = capsys.readouterr().out
    assert "differs between runs on the same host" in out
    assert "gpu-3090" not in out                    # the recorded (container) hostname
    assert "only on" not in out
    assert f"cmp/{leaky.name}" in out or str(leaky) in out   # equal NAME/TIME: full paths


def test_one_image_against_another_on_the_same_host(hosts: tuple[Path, Path]) -> None:
    results = read_run(hosts[1]).results
    comparison = compare_images(results, results, "20.12", "22.12")
    assert comparison.sentences() == [
        "loop leaks only with 22.12 (not with 20.12) on RTX 4090"]
    assert [p.key for p in comparison.pairs] == [("gpu0", "loop"), ("gpu0", "zeros")]


def test_cli_compare_hosts(hosts: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(hosts[0]), str(hosts[1])]) == 1
    out = capsys.readouterr().out
    assert "loop leaks only on RTX 4090 with 22.12 (not on RTX 3090)" in out


def test_cli_compare_images(hosts: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(hosts[0]), "--image", "20.12", "--image", "22.12"]) == 0
    assert "no differences in verdict between 20.12 and 22.12" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "message"), [
    (["{a}"], "compare needs two results directories"),
    (["{a}", "{empty}"], "B {empty}: not a results directory"),
    (["{a}", "--image", "20.12"], "--image given 1 time(s)"),
    (["{a}", "--image", "20.12", "--image", "99.99"], "--image 99.99: no such image"),
    # issue 63's new-user pass: reports/<name> (as report and explain take it) said
    # "not a results directory" with no fix; it names the newest run it holds
    (["{runs}", "{a}"], "A {runs}: not a results directory (no plan.json or cells/ here); "
                        "harness compare reads a sweep or reanalyzed directory "
                        "(reports/<name>/<timestamp>)\n"
                        "  fix: pass one of the runs it holds, the newest: {a}\n"),
    # issue 79 item 12: `compare reports/NAME /nonexistent` refused A and said nothing
    # of B, which does not exist: the missing path is named first, with the fix
    (["{runs}", "{gone}"], "B {gone}: no such directory\n  fix: pass a results directory "
                           "(reports/<name>/<timestamp>, as harness sweep writes it)"),
    (["{gone}", "{a}"], "A {gone}: no such directory\n  fix: "),
])
def test_cli_compare_bad_input(hosts: tuple[Path, Path], tmp_path: Path, argv: list[str],
                               message: str, capsys: pytest.CaptureFixture[str]) -> None:
    names = {"a": str(hosts[0]), "empty": str(tmp_path), "runs": str(hosts[0].parent),
             "gone": str(tmp_path / "nonexistent")}
    assert main(["compare", *(x.format(**names) for x in argv)]) == 2
    err = capsys.readouterr().err
    assert message.format(**names) in err
    assert "Traceback" not in err


def test_compare_image_accepts_the_full_reference(tmp_path: Path) -> None:
    from harness.compare import image_label
    from harness.errors import InputError

    results = as_results({f"{t}.gpu0.x": {
        "image": {"label": f"{t}-tf1-py3", "ref": f"nvcr.io/nvidia/tensorflow:{t}-tf1-py3"}}
        for t in ("20.12", "22.12")})
    assert image_label("nvcr.io/nvidia/tensorflow:22.12-tf1-py3", results, tmp_path) == \
        "22.12-tf1-py3"
    assert image_label("20.12-tf1-py3", results, tmp_path) == "20.12-tf1-py3"
    with pytest.raises(InputError, match="or their full references"):
        image_label("nvcr.io/nvidia/tensorflow:23.01-tf1-py3", results, tmp_path)


@pytest.fixture
def one_dir(hosts: tuple[Path, Path], tmp_path: Path) -> Path:
    """The two hosts' cells in one results directory, as a `hosts:` sweep writes them
    (cell ids prefixed by the host label; the 4090 host listed first in cell order)."""
    out = tmp_path / "both"
    for label, src in (("h4090", hosts[1]), ("h3090", hosts[0])):
        for cell in (src / "cells").iterdir():
            data = json.loads((cell / "result.json").read_text())
            data["id"] = f"{label}.{data['id']}"
            data["host"]["label"] = label
            dst = out / "cells" / data["id"]
            shutil.copytree(cell, dst)
            (dst / "result.json").write_text(json.dumps(data))
    (out / "matrix.yaml").write_text(
        "name: cmp\nhosts: [{name: h3090, url: 'tcp://a:2375'}, {name: h4090, url: "
        "'tcp://b:2375'}]\nmatrix: {image: ['20.12', '22.12'], scenario: [loop.py]}\n")
    return out


@pytest.mark.parametrize("twice", [False, True])
def test_one_hosts_sweep_compares_its_hosts(one_dir: Path, twice: bool,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    # WHEN `compare DIR` (or `compare DIR DIR`) on a sweep over two hosts
    argv = ["compare", str(one_dir)] + ([str(one_dir)] if twice else [])
    assert main(argv) == 1
    out = capsys.readouterr().out
    # THEN the matrix's first host is the old one, each side named by its GPU
    assert "loop leaks only on RTX 4090 on h4090 with 22.12 (not on RTX 3090 on h3090)" in out
    head = out.splitlines()[0]
    assert head.index("RTX 3090") < head.index("RTX 4090")
    assert "on both" not in out


def test_host_flags_pick_and_order_the_hosts(one_dir: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(one_dir), "--host", "h4090", "--host", "h3090"]) == 1
    head = capsys.readouterr().out.splitlines()[0]
    assert head.index("RTX 4090") < head.index("RTX 3090")
    assert main(["compare", str(one_dir), "--host", "h5090", "--host", "h3090"]) == 2
    assert "--host h5090: no such host" in capsys.readouterr().err
    assert main(["compare", str(one_dir), "--host", "h3090"]) == 2
    assert "--host given 1 time(s)" in capsys.readouterr().err


def test_a_sweep_over_three_hosts_compares_the_first_with_each_other(
        one_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a third host, a second 4090 machine, in the same results directory
    for cell in sorted((one_dir / "cells").iterdir()):
        if cell.name.startswith("h4090."):
            data = json.loads((cell / "result.json").read_text())
            data["id"] = "h4090b." + data["id"].removeprefix("h4090.")
            data["host"]["label"] = "h4090b"
            dst = one_dir / "cells" / data["id"]
            shutil.copytree(cell, dst)
            (dst / "result.json").write_text(json.dumps(data))
    matrix = one_dir / "matrix.yaml"
    matrix.write_text(matrix.read_text().replace(
        "]\nmatrix", ", {name: h4090b, url: 'tcp://c:2375'}]\nmatrix"))
    # WHEN `compare DIR`
    assert main(["compare", str(one_dir)]) == 1
    out = capsys.readouterr().out
    # THEN the first host is compared with each of the others, each named by its GPU
    heads = [line for line in out.splitlines() if line.startswith("== ")]
    assert heads == ["== RTX 3090 on h3090 (old) vs RTX 4090 on h4090 ==",
                     "== RTX 3090 on h3090 (old) vs RTX 4090 on h4090b =="]
    assert "loop leaks only on RTX 4090 on h4090b with 22.12 (not on RTX 3090 on h3090)" in out
    # AND --host picks one pair of them
    assert main(["compare", str(one_dir), "--host", "h4090", "--host", "h4090b"]) == 1
    out = capsys.readouterr().out
    assert not any(line.startswith("== ") for line in out.splitlines())
    assert "no differences in verdict between RTX 4090 on h4090 and RTX 4090 on h4090b" in out


def test_the_step_ratio_of_two_runs_says_it_is_of_single_runs() -> None:
    """Issue 63 item 5: two runs of identical code showed a step B/A column of
    0.32x-1.62x with no caveat, beside rounds' ratios near 1.0."""
    def cells(steps: dict[str, float]) -> dict[str, Any]:
        return {f"{label}.cpu.s": {"id": f"{label}.cpu.s", "row": "cpu.s", "verdict": "ok",
                                   "image": {"label": label, "index": i},
                                   "scenario": {"id": "s"},
                                   "summary": {"median_step_s": step}}
                for i, (label, step) in enumerate(steps.items())}

    one = as_results(cells({"v1": 0.001, "v2": 0.001}))
    two = as_results(cells({"v1": 0.00032, "v2": 0.00162}))
    out = io.StringIO()
    compare_hosts(one, two).render(out)
    text = out.getvalue()
    assert "step B/A (1 run each)" in text.splitlines()[0]
    assert ("step B/A (0.32x-1.62x): the median step of one run on each side, on the wall "
            "clock at different times, its waits for a CPU in it: single runs, not a "
            "measured change") in text, text
