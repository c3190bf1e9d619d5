"""`harness images build` (harness/devtools.py) over a fake engine and fake tools:
the pip contexts are prepared beside the shell recipes, each image is built once after its
base, up-to-date images are skipped, and a failed base stops what stands on it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from harness import devtools
from harness.errors import ImageUnavailable
from harness.runtimes import process

RECIPES = """\
base:
  tag: t/base:1
  script: base.sh
tf:
  tag: t/tf:1
  from: base
  pip: [tensorflow-cpu==2.12.0]
libs:
  tag: t/libs:1
  from: base
  pip: [onnx]
py37:
  tag: t/py37:1
  script: py37.sh
ngc:
  tag: t/ngc:1
  from: py37
  pip: [tensorflow==1.15.5]
"""


class Engine:
    """Knows each tag's labels; records builds in order, with the images there then."""

    def __init__(self, labels: dict[str, dict[str, str]] | None = None) -> None:
        self.labels = dict(labels or {})
        self.built: list[tuple[str, str]] = []   # (tag, FROM line of its Dockerfile)
        self.lock = threading.Lock()

    def image_labels(self, tag: str) -> dict[str, str] | None:
        return self.labels.get(tag)

    def build(self, context: Path, tag: str, labels: dict[str, str], progress: Any) -> str:
        base = (context / "Dockerfile").read_text().splitlines()[0].split()[1]
        with self.lock:
            assert base in self.labels, f"{tag} built before its base {base}"
            self.built.append((tag, base))
            self.labels[tag] = labels
        return "sha256:" + tag


class Tools:
    """Stands for bash (the shell recipes), pip and compileall; `on_script` decides what
    a shell recipe does (its exit code) and may wait for something first."""

    def __init__(self, engine: Engine, on_script: Callable[[str], int]) -> None:
        self.engine = engine
        self.on_script = on_script
        self.pip_started = threading.Event()
        self.scripts: list[str] = []
        self.checked: list[str] = []
        self.pips: list[str] = []

    def stream_lines(self, argv: Sequence[str], *, on_line: Callable[[str], None],
                     running: Any = None, **_: Any) -> int:
        if argv[0] == "bash":
            self.scripts.append(Path(argv[1]).name)
            rc = self.on_script(Path(argv[1]).name)
            if rc == 0:
                self.engine.labels[argv[2]] = {}
            return rc
        self.pips.append(argv[-1])
        self.pip_started.set()
        return 0

    def check_output(self, argv: Sequence[str], *, env: dict[str, str] | None = None,
                     **_: Any) -> tuple[int, str]:
        if argv[0] == "bash":       # a shell recipe asked whether its image is up to date
            assert env is not None and env.get("RECIPE_CHECK") == "1"
            self.checked.append(Path(argv[1]).name)
            return (0 if argv[2] in self.engine.labels else 1), ""
        return 0, ""


@pytest.fixture
def recipes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, devtools.Recipe]:
    monkeypatch.setattr(devtools, "cache_dir", lambda: tmp_path / "cache")
    for script in ("base.sh", "py37.sh"):
        (tmp_path / script).write_text("exit 0\n")
    (tmp_path / "images.yaml").write_text(RECIPES)
    return devtools.load_recipes(tmp_path / "images.yaml")


def use(monkeypatch: pytest.MonkeyPatch, tools: Tools) -> None:
    monkeypatch.setattr(process, "stream_lines", tools.stream_lines)
    monkeypatch.setattr(process, "check_output", tools.check_output)


def test_contexts_are_prepared_while_the_base_is_built(
        recipes: dict[str, devtools.Recipe], monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a base recipe that only finishes once some pip install has started
    engine = Engine()
    waited: dict[str, bool] = {}

    def script(name: str) -> int:
        waited[name] = tools.pip_started.wait(timeout=10)
        return 0

    tools = Tools(engine, script)
    use(monkeypatch, tools)
    lines: list[str] = []
    built = devtools.build(recipes, [], lines.append, engine=engine)
    # THEN the pip installs ran while the shell recipes did (not after them)
    assert waited == {"base.sh": True, "py37.sh": True}
    assert sorted(tools.pips) == ["onnx", "tensorflow-cpu==2.12.0", "tensorflow==1.15.5"]
    # AND each image was built once, on its base
    assert sorted(engine.built) == [("t/libs:1", "t/base:1"), ("t/ngc:1", "t/py37:1"),
                                    ("t/tf:1", "t/base:1")]
    assert sorted(built) == sorted(r.tag for r in recipes.values())
    assert any(line.startswith("tf: pip install --target") for line in lines), lines


def test_up_to_date_images_are_skipped(recipes: dict[str, devtools.Recipe],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    label = devtools.RECIPE_LABEL
    engine = Engine({r.tag: {label: r.digest(recipes)} for r in recipes.values()
                     if r.name != "libs"})
    tools = Tools(engine, lambda name: 0)
    use(monkeypatch, tools)
    lines: list[str] = []
    assert devtools.build(recipes, ["libs", "tf"], lines.append, engine=engine) == ["t/libs:1"]
    assert tools.scripts == [] and tools.pips == ["onnx"]
    assert engine.built == [("t/libs:1", "t/base:1")]
    assert "[3/3] t/tf:1: up to date" in lines
    assert tools.checked == ["base.sh"]      # asked of the shell recipe itself


def test_check_names_what_is_out_of_date_and_builds_nothing(
        recipes: dict[str, devtools.Recipe], monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the base built, py37 not (its script says), tf built from another recipe
    label = devtools.RECIPE_LABEL
    engine = Engine({"t/base:1": {}, "t/tf:1": {label: "another"},
                     "t/libs:1": {label: recipes["libs"].digest(recipes)}})
    tools = Tools(engine, lambda name: 0)
    use(monkeypatch, tools)
    lines: list[str] = []
    todo = devtools.out_of_date(recipes, [], engine, lines.append, doing="out of date")
    # THEN the images to build are named in build order, and nothing ran or was built
    assert [r.tag for r, _ in todo] == ["t/tf:1", "t/py37:1", "t/ngc:1"]
    assert "[1/5] t/base:1: up to date" in lines and "[2/5] t/tf:1: out of date" in lines
    assert tools.scripts == [] and tools.pips == [] and engine.built == []


def test_a_failed_base_fails_the_build_and_builds_nothing_on_it(
        recipes: dict[str, devtools.Recipe], monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine()
    tools = Tools(engine, lambda name: 3 if name == "base.sh" else 0)
    use(monkeypatch, tools)
    with pytest.raises(ImageUnavailable, match=r"base\.sh failed with exit code 3"):
        devtools.build(recipes, [], lambda _: None, engine=engine)
    assert [tag for tag, _ in engine.built] == ["t/ngc:1"]   # the other chain stands
