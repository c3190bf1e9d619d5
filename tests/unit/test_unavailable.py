"""Issue 15 point 1: a cell that cannot be prepared is `unavailable`, the sweep carries on
and the reports are written; the reason is one clean sentence with a fix that fits."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import docker.errors
import pytest
from fakeruntime import Behaviour, FakeRuntime

from harness.cli import main
from harness.errors import ImageUnavailable
from harness.matrixfile.model import ImageSpec
from harness.report import Report, write_all
from harness.runtimes.base import ImageInfo, Progress
from harness.runtimes.dockerengine import pull_failure
from harness.sweeping.course import exit_code
from tests.unit.test_orchestrator import by_image, make_matrix, run

RAW = ('404 Client Error for http+docker://localhost/v1.43/images/create?tag=9.99&'
       'fromImage=nvcr.io%2Fnvidia%2Ftensorflow: Not Found ("manifest for '
       'nvcr.io/nvidia/tensorflow:9.99 not found: manifest unknown: manifest unknown")')


class MissingImage(FakeRuntime):
    def prepare(self, image: ImageSpec, progress: Progress) -> ImageInfo:
        if image.label == "v2":
            self.prepared.append(image.label)
            raise ImageUnavailable(pull_failure("nvcr.io/nvidia/tensorflow:9.99",
                                                docker.errors.APIError(RAW)))
        return super().prepare(image, progress)


@pytest.mark.parametrize("leak_v3, code", [(0.0, 3), (8192.0, 1)])
def test_missing_image_is_a_cell_outcome_and_the_sweep_goes_on(
        tmp_path: Path, leak_v3: float, code: int) -> None:
    matrix = make_matrix(tmp_path)
    rt = MissingImage(by_image({"v3": Behaviour(leak_per_iter=leak_v3)}))
    outcome = run(matrix, rt, tmp_path)
    verdicts = {k.split(".")[0]: r.verdict for k, r in outcome.results.items()}
    assert verdicts["v2"] == "unavailable"
    assert verdicts["v1"] == "ok"
    assert verdicts["v3"] == ("leak" if leak_v3 else "ok")
    assert [c.split(".")[0] for c in rt.runs] == ["v1", "v3"]   # v2 never started
    assert rt.prepared.count("v2") == 1
    res = outcome.results["v2.gpu0.loop"]
    assert "not found in its registry" in res.reason
    text = json.dumps(res.to_json())
    assert "http+docker" not in text and "Client Error" not in text
    on_disk = json.loads((outcome.store.root / "cells" / "v2.gpu0.loop" / "result.json")
                         .read_text())
    assert on_disk["verdict"] == "unavailable"
    report = Report.from_results(matrix.name, outcome.results, root=outcome.store.root)
    paths = write_all(outcome.store, report)
    assert {p.name for p in paths} >= {"results.json", "report.md", "report.html", "junit.xml"}
    assert "Not run" in (outcome.store.root / "report.md").read_text()
    assert exit_code(report) == code


def test_pull_failure_text_is_clean_and_the_fix_fits_the_registry() -> None:
    text = pull_failure("nvcr.io/nvidia/tensorflow:9.99", docker.errors.APIError(RAW))
    first, fix = text.splitlines()
    assert first.startswith("image nvcr.io/nvidia/tensorflow:9.99 not found in its registry")
    assert "Client Error" not in text and "http+docker" not in text
    assert "images build" not in text and "docker pull nvcr.io" in fix
    # a test image with no recipe: `harness images build` could not make it (issue 35)
    ours = pull_failure("harness-test/tf-cpu:9.9", docker.errors.APIError(
        "pull access denied for harness-test/tf-cpu, repository does not exist"))
    assert "harness images build" not in ours and "check the tag exists" in ours
    offline = pull_failure("python:3.12", docker.errors.APIError(
        'Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io: '
        "no such host"))
    assert "cannot be reached" in offline.splitlines()[0]


def test_an_image_that_cannot_be_prepared_is_said_at_once(tmp_path: Path) -> None:
    """Issue 79 (a new user): an image that could not be built was said only when its
    cells' turn came, after every cell of the images before it had run."""
    from sweepkit import write_matrix

    from harness import matrixfile

    # GIVEN three scenarios on v1, then v2, whose image cannot be pulled
    matrix = matrixfile.load(write_matrix(tmp_path, ["v1", "v2"], ["a.py", "b.py", "c.py"],
                                          defaults={"iterations": 100, "warmup": 10}))
    said: list[str] = []
    rt = MissingImage(by_image({}))
    run(matrix, rt, tmp_path, progress=said.append)
    # THEN it is said once, before v1's last cell has run, and its cells are unavailable
    failed = [k for k, line in enumerate(said) if line.startswith("v2: cannot be prepared (")]
    v1_last = max(k for k, line in enumerate(said) if line.startswith("[3/6] v1."))
    assert len(failed) == 1 and failed[0] < v1_last, said
    assert "its cells end unavailable when their turn comes" in said[failed[0]]


def test_bad_pip_pin_on_the_local_runtime_is_unavailable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "s.py").write_text("def setup(p):\n    return 1\ndef step(s):\n    pass\n")
    missing = tmp_path / "no-such-package-dir"
    (tmp_path / "m.yaml").write_text(
        "name: pins\nruntime: local\ndefaults: {iterations: 60, warmup: 5, repeats: 0}\n"
        f"matrix:\n  image: [{{name: good, python: {sys.executable}}}, "
        f"{{name: badpin, python: {sys.executable}, pip: ['{missing}']}}, "
        f"{{name: after, python: {sys.executable}}}]\n  scenario: [s.py]\n")
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    code = main(["sweep", str(tmp_path / "m.yaml"), "-q", "--out", str(tmp_path / "r")])
    out, err = capsys.readouterr()
    assert code == 3, (out, err)
    assert "Traceback" not in err + out
    [results] = list((tmp_path / "r" / "pins").glob("*/results.json"))
    cells = json.loads(results.read_text())["cells"]
    assert cells["badpin.cpu.s"]["verdict"] == "unavailable"
    assert "pip cannot install" in cells["badpin.cpu.s"]["reason"]
    # the cells around it ran (their verdict is whatever 60 iterations say)
    assert cells["good.cpu.s"]["end"]["status"] == "ok"
    assert cells["after.cpu.s"]["end"]["status"] == "ok"
    assert (results.parent / "report.html").is_file()
    assert "badpin: badpin: pip cannot install" in out or "badpin:" in out
    leftovers = list((tmp_path / "cache" / "venvs").glob("*.tmp*"))
    assert leftovers == []


def test_an_unavailable_image_is_headlined_as_measured_by_nothing() -> None:
    """Issue 79 item 8: a row of unavailable cells read `a unavailable: first bad is a or
    later, if any`, a first-bad claim where nothing was measured; it says so, and why."""
    from harness.answers.search import answer_rows
    from tests.resultkit import as_result

    why = ("uv pip cannot install six==99.0: Because there is no version of six==99.0 "
           "and you require six==99.0, we can conclude that your requirements are "
           "unsatisfiable.\n  fix: check that these versions exist for this Python")

    def row(*cells: tuple[str, str]) -> str:
        results = {f"{label}.cpu.s": as_result({
            "id": f"{label}.cpu.s", "row": "cpu.s", "verdict": verdict,
            "reason": why if verdict == "unavailable" else "",
            "image": {"label": label, "index": i}}) for i, (label, verdict) in enumerate(cells)}
        [answer] = answer_rows(results)
        return answer.sentence

    # GIVEN a row whose every image could not be had
    said = row(("a", "unavailable"), ("b", "unavailable"))
    # THEN the headline says nothing was measured for each, and why; no first bad
    assert said == ("nothing measured for a (uv pip cannot install six==99.0), b (uv pip "
                    "cannot install six==99.0)"), said
    # AND an unavailable image after a good one is no bad image either
    said = row(("a", "ok"), ("b", "unavailable"))
    assert said == "no bad image among those measured; nothing measured for b (uv pip " \
                   "cannot install six==99.0)", said
    # AND before a bad image it may be the first bad: the range is named, as it was
    said = row(("a", "ok"), ("b", "unavailable"), ("c", "leak"))
    assert said == "nothing measured for b (uv pip cannot install six==99.0): first bad " \
                   "is b or later, up to c", said
