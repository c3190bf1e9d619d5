"""`harness sweep --between OLD NEW --scenario FILE` (issue 52 item 3): two lock files
swept as one row's images, OLD the baseline; where NEW is bad, straight on to
`harness culprit`'s search over the packages that differ, on the fake runtime."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from fakeruntime import Behaviour, FakeRuntime

from harness.cli import main
from harness.matrixfile.model import Cell, ImageSpec
from harness.runtimes.base import ImageInfo, Progress

STEP = "def setup(params):\n    return None\n\n\ndef step(state):\n    pass\n"
OLD = {"multidict": "6.4.4", "yarl": "1.9.4", "attrs": "23.2.0", "idna": "3.6"}
# three packages move; only multidict 6.6.3 leaks
NEW = {**OLD, "multidict": "6.6.3", "yarl": "1.20.1", "attrs": "25.3.0"}


def lock_text(pins: dict[str, str]) -> str:
    """A requirements lock with a made-up sha256 per file (name and version)."""
    lines = ["# pip-compile --generate-hashes output, by hand"]
    for name, version in pins.items():
        digest = hashlib.sha256(f"{name}-{version}".encode()).hexdigest()
        lines += [f"{name}=={version} \\", f"    --hash=sha256:{digest}"]
    return "\n".join(lines) + "\n"


class Recording(FakeRuntime):
    """The fake runtime, keeping every image it prepared (hybrids included)."""

    images: list[ImageSpec]

    def prepare(self, image: ImageSpec, progress: Progress) -> ImageInfo:
        self.images.append(image)
        return super().prepare(image, progress)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> list[Recording]:
    made: list[Recording] = []

    def behave(cell: Cell) -> Behaviour:
        return Behaviour(leak_per_iter=6000) if "multidict==6.6.3" in cell.image.pip \
            else Behaviour()

    def get_runtime(name: str, docker_host: str | None = None) -> Recording:
        runtime = Recording(behave, pins_as_packages=True)
        runtime.images = []
        made.append(runtime)
        return made[-1]

    monkeypatch.setattr("harness.runtimes.get_runtime", get_runtime)
    return made


def files(tmp: Path, old: dict[str, str] = OLD, new: dict[str, str] = NEW
          ) -> tuple[Path, Path, Path]:
    (tmp / "old.txt").write_text(lock_text(old))
    (tmp / "new.txt").write_text(lock_text(new))
    (tmp / "step.py").write_text(STEP)
    return tmp / "old.txt", tmp / "new.txt", tmp / "step.py"


def between(tmp: Path, *extra: str) -> int:
    old, new, step = files(tmp)
    return main(["sweep", "--between", str(old), str(new), "--scenario", str(step),
                 "--out", str(tmp / "r"), "--iterations", "300", "--warmup", "10", *extra])


def test_between_two_locks_names_the_one_package_that_leaks(
        tmp_path: Path, fake: list[Recording], capsys: pytest.CaptureFixture[str]) -> None:
    assert between(tmp_path) == 1
    out, err = capsys.readouterr()
    assert "between old and new: 3 packages differ: attrs 23.2.0 -> 25.3.0, multidict " \
           "6.4.4 -> 6.6.3, yarl 1.9.4 -> 1.20.1" in err
    assert "culprit cpu.step: new is leak, old ok: which package change did it" in err
    assert "culprit, cpu.step: cause: multidict 6.4.4 -> 6.6.3. B with multidict 6.4.4: " \
           "ok" in out
    # the workaround names the new lock's file and line, not a matrix's `pip:` list the
    # user never wrote (issue 79 item 11); multidict is line 2 of lock_text's file
    new = (tmp_path / "new.txt").resolve()
    assert f"in B's lock: {new}:2, multidict==6.6.3 -> multidict==6.4.4, then lock " \
           "again)" in " ".join(out.split()), out
    assert "in the matrix:" not in out
    base = tmp_path / "r" / "between-old-new"
    (run,) = [p for p in base.iterdir() if p.is_dir()]
    saved = json.loads((run / "culprit" / "cpu.step" / "culprit.json").read_text())
    assert saved["status"] == "found"
    assert [c["name"] for c in saved["answer"]] == ["multidict"]
    assert sorted(c["name"] for c in saved["difference"]["packages"]) == [
        "attrs", "multidict", "yarl"]
    # the two locks were the row's images, OLD the baseline; the hybrids kept the
    # locks' hashes (every pin of a hybrid is in one of the two locks)
    (runtime,) = fake
    assert [i.label for i in runtime.images[:2]] == ["old", "new"]
    assert all(i.hashes for i in runtime.images)
    assert any(i.label.startswith("culprit-") for i in runtime.images)
    # a matrix like any other: report reads the run, with the culprit under the row
    assert (base / "between.yaml").is_file()
    assert main(["report", str(run)]) == 1
    assert "culprit, cpu.step: cause: multidict 6.4.4 -> 6.6.3" in capsys.readouterr().out
    # again with --resume: every cell and hybrid reused, nothing runs
    assert between(tmp_path, "--resume", "-q") == 1
    assert fake[-1].runs == []


def test_between_with_new_good_searches_nothing(tmp_path: Path, fake: list[Recording],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    old, new, step = files(tmp_path, NEW, OLD)      # the leaky one is OLD here
    assert main(["sweep", "--between", str(old), str(new), "--scenario", str(step), "--out",
                 str(tmp_path / "r"), "--iterations", "300", "--warmup", "10"]) == 1
    err = capsys.readouterr().err
    assert "which package change did it" not in err
    assert not list((tmp_path / "r").glob("*/*/culprit"))


def test_between_takes_a_matrix_for_its_scenarios(tmp_path: Path, fake: list[Recording],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    old, new, _ = files(tmp_path)
    (tmp_path / "sc").mkdir()
    (tmp_path / "sc" / "loop.py").write_text(STEP)
    (tmp_path / "m.yaml").write_text(
        "name: suite\nruntime: local\ndefaults: {iterations: 300, warmup: 10, "
        "sample_every: 5, repeats: 0}\nmatrix:\n  image: [{name: x, pip: [attrs==1]}]\n"
        "  gpu: [none]\n  scenario: [sc/loop.py, {script: sc/loop.py, id: again}]\n")
    assert main(["sweep", str(tmp_path / "m.yaml"), "--between", str(old), str(new),
                 "--out", str(tmp_path / "r"), "-q"]) == 1
    base = tmp_path / "r" / "suite-between-old-new"
    (run,) = [p for p in base.iterdir() if p.is_dir()]
    assert {p.name for p in (run / "culprit").iterdir()} == {"cpu.loop", "cpu.again"}


@pytest.mark.parametrize(("argv", "said"), [
    (["sweep"], "no matrix file: harness sweep MATRIX, or harness sweep --between OLD NEW"),
    (["sweep", "--between", "old.txt", "new.txt"], "--between needs a scenario"),
    (["sweep", "--scenario", "step.py"], "--scenario goes with --between OLD NEW"),
    (["sweep", "--between", "old.txt", "bad.txt", "--scenario", "step.py"],
     "bad.txt: line 2: idna: no exact version ('idna>=3')"),
    (["sweep", "--between", "old.txt", "nope.txt", "--scenario", "step.py"],
     "nope.txt: lock file not found"),
    (["sweep", "--between", "old.txt", "new.txt", "--scenario", "nope.py"],
     "--scenario nope.py: no such file"),
    (["sweep", "docker.yaml", "--between", "old.txt", "new.txt"],
     "runtime docker: --between builds each lock into a venv"),
    # Issue 63 item 13: one file twice ran as between-old-old-old-new without a word
    (["sweep", "--between", "old.txt", "./old.txt", "--scenario", "step.py"],
     "--between old.txt old.txt: OLD and NEW are one file, so nothing differs"),
])
def test_between_mistakes_exit_2(tmp_path: Path, fake: list[Recording],
                                 monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str], argv: list[str],
                                 said: str) -> None:
    files(tmp_path)
    (tmp_path / "bad.txt").write_text("attrs==25.3.0\nidna>=3\n")
    (tmp_path / "docker.yaml").write_text(
        "name: d\nruntime: docker\nmatrix:\n  image: [python:3.11]\n  scenario: [step.py]\n")
    monkeypatch.chdir(tmp_path)
    assert main([*argv, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err, err
    assert fake == []       # nothing ran


def test_two_locks_of_one_stem_are_named_by_their_directories(tmp_path: Path) -> None:
    """Issue 63 item 13: `v1/req.txt v2/req.txt` were `req-old`, `req-new` in a run
    `between-req-old-req-new`; their directories tell them apart, and where nothing
    does, the run is `between-req-old-new`."""
    from harness.sweeping.between import names, run_words

    assert names([tmp_path / "v1" / "req.txt", tmp_path / "v2" / "req.txt"]) == ["v1", "v2"]
    same = names([tmp_path / "a" / "x" / "req.txt", tmp_path / "b" / "x" / "req.txt"])
    assert same == ["req-old", "req-new"]
    assert "-".join(["between", *run_words(same)]) == "between-req-old-new"
    assert run_words(["old", "new"]) == ["old", "new"]
