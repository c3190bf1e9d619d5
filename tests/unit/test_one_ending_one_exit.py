"""One ending, one exit code: a scenario that crashes (or times out) on every image of
its row exits 2 (README's exit-code table: "a scenario that fails the same way on every
image of a row"), whether the row has one image or several."""

from __future__ import annotations

from pathlib import Path

import pytest

SCENARIO = "def setup(params):\n    return None\n\n\ndef step(state):\n    pass\n"


@pytest.fixture
def behaviours(monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """The CLI's runtime is a FakeRuntime; `behaviours["b"]` is every cell's Behaviour."""
    from fakeruntime import Behaviour, FakeRuntime

    said: dict[str, object] = {"b": Behaviour()}
    monkeypatch.setattr("harness.runtimes.get_runtime",
                        lambda name, docker_host=None: FakeRuntime(lambda cell: said["b"]))
    return said


def matrix(tmp_path: Path, images: int) -> Path:
    (tmp_path / "s.py").write_text(SCENARIO)
    path = tmp_path / f"m{images}.yaml"
    names = ", ".join(f"{{name: v{i}}}" for i in range(1, images + 1))
    path.write_text(f"name: m{images}\nruntime: local\n"
                    "defaults: {iterations: 300, warmup: 10, sample_every: 5, repeats: 0, "
                    f"timeout: 45}}\nmatrix:\n  image: [{names}]\n  gpu: [none]\n"
                    "  scenario: [s.py]\n")
    return path


@pytest.mark.parametrize("ending", ["crash", "timeout"])
def test_a_row_that_fails_on_its_only_image_exits_as_over_two_images(
        tmp_path: Path, behaviours: dict[str, object], ending: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    from fakeruntime import Behaviour

    from harness.cli import main

    # GIVEN a scenario that crashes (or is killed at its deadline) on any image
    behaviours["b"] = (Behaviour(error="ValueError: boom") if ending == "crash"
                       else Behaviour(timed_out=True))
    codes = {}
    for images in (1, 2):
        # WHEN it is swept over one image, then over two
        codes[images] = main(["sweep", str(matrix(tmp_path, images)), "-q",
                              "--out", str(tmp_path / "r")])
        out = capsys.readouterr().out
        # THEN each row says it is the scenario's, not a finding about the image
        assert "bad from the first image" not in out, out
        assert "on every image" in out, out
    # AND both exit 2, as the README's table says of a scenario failing on every image
    assert codes == {1: 2, 2: 2}


def test_a_crash_on_one_of_two_images_is_still_a_finding(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from fakeruntime import Behaviour, FakeRuntime

    from harness.cli import main

    # GIVEN a scenario that crashes on v2 only
    monkeypatch.setattr("harness.runtimes.get_runtime",
                        lambda name, docker_host=None: FakeRuntime(
                            lambda cell: Behaviour(error="boom" if cell.image.label == "v2"
                                                   else None)))
    # WHEN swept over two images, THEN v2 is the first bad and the sweep exits 1
    assert main(["sweep", str(matrix(tmp_path, 2)), "-q", "--out", str(tmp_path / "r")]) == 1
    assert "first bad: v2 (last good: v1)" in capsys.readouterr().out
