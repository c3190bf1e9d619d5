"""Issue 31: runtimes by declared ability (`matrixfile.model.ABILITIES`), not by name, and
`runtime: podman`'s differences from docker (harness/runtimes/podman.py), without an engine."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from harness import matrixfile
from harness.errors import SpecError
from harness.gpu.engine import device_request_kwargs
from harness.matrixfile.model import ABILITIES, RUNTIMES, abilities
from harness.result.model import load_result

ROOT = Path(__file__).resolve().parents[2]
# A runtime's name compared as a string: `== "docker"`, `"local" !=`, `x.runtime == ...`.
NAME_COMPARISON = re.compile(r"""(==|!=) *['"](docker|local|podman)['"]|"""
                             r"""['"](docker|local|podman)['"] *(==|!=|if )|"""
                             r"""runtime_is_docker|\.runtime *(==|!=|in )""")


def name_comparisons() -> list[str]:
    found = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("harness/runtimes/"):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if NAME_COMPARISON.search(line):
                found.append(f"{rel}:{n}: {line.strip()}")
    return found


def test_at_most_two_runtime_name_comparisons_outside_the_runtimes() -> None:
    """What branched on a runtime's name asks its abilities (issue 31: there were 14, and
    a host label compared with "local"; fit.py and report/html.py's cgroup lines
    are the two left, for `own_cgroup`)."""
    found = name_comparisons()
    assert len(found) <= 2, "\n".join(found)


def test_every_runtime_name_has_a_factory_abilities_and_a_class_that_reads_them() -> None:
    """ARCHITECTURE.md's "Where to add" a runtime: its name in RuntimeName, its factory in
    FACTORIES, its abilities in ABILITIES; its class answers with its own entry."""
    from harness.runtimes import FACTORIES
    from harness.runtimes.docker import DockerRuntime
    from harness.runtimes.local import LocalRuntime
    from harness.runtimes.podman import PodmanRuntime

    assert set(FACTORIES) == set(RUNTIMES) == set(ABILITIES)
    classes = {"docker": DockerRuntime, "local": LocalRuntime, "podman": PodmanRuntime}
    assert set(classes) == set(RUNTIMES)
    for name, cls in classes.items():
        assert cls.name == name
        assert abilities(name) is ABILITIES[name]
    architecture = (ROOT / "ARCHITECTURE.md").read_text()
    assert "ABILITIES" in architecture and "FACTORIES" in architecture


def test_a_slurm_result_has_its_inner_runtime_abilities() -> None:
    assert abilities("slurm/podman") is ABILITIES["podman"]
    assert abilities("slurm/local") is ABILITIES["local"]


def load(tmp_path: Path, runtime: str, image: str = "harness-test/base:bookworm",
         extra: str = "") -> matrixfile.Matrix:
    (tmp_path / "s.py").write_text("def setup(p):\n    return 0\n\ndef step(s):\n    pass\n")
    path = tmp_path / "matrix.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: demo
        runtime: {runtime}
        matrix:
          image: [{image}]
          gpu: [none]
          scenario: [s.py]
        """) + extra)
    return matrixfile.load(path)


def test_a_podman_matrix_takes_container_images(tmp_path: Path) -> None:
    m = load(tmp_path, "podman", extra="include:\n  - {image: 'harness-test/base:trixie', "
                                        "scenario: s}\n")
    assert m.runtime == "podman"
    # labelled as container images are (the tag), the include's new image too
    assert [i.label for i in m.images] == ["bookworm"]
    assert {c.image.label for c in m.cells} == {"bookworm", "trixie"}
    with pytest.raises(SpecError, match="pip requirement sets are for `runtime: local`"):
        load(tmp_path, "podman", image="{ref: 'a:1', pip: [numpy]}")


def test_an_include_on_a_local_matrix_is_an_interpreter(tmp_path: Path) -> None:
    m = load(tmp_path, "local", image="python3",
             extra="include:\n  - {image: /usr/bin/python3.11, scenario: s}\n")
    assert {c.image.label for c in m.cells} == {"python3", "python3.11"}


def test_hosts_need_a_runtime_that_serves_them(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        load(tmp_path, "podman", extra="hosts: [ssh://root@box]\n")
    assert "runtime podman runs no `hosts:` endpoints" in str(info.value)
    assert "use `runtime: docker`" in str(info.value)
    assert len(load(tmp_path, "docker", extra="hosts: [ssh://root@box]\n").hosts) == 1


def test_the_reproducer_names_the_engine_the_cell_ran_on() -> None:
    from harness.report.issue import reproducer

    def res(runtime: str) -> Any:
        return load_result({"schema": 1, "id": "a.cpu.s", "row": "cpu.s", "verdict": "leak",
                            "reason": "r", "runtime": runtime,
                            "image": {"label": "a", "index": 0, "ref": "repo/img:1"},
                            "gpu": {"value": "none", "label": "cpu"},
                            "scenario": {"id": "s"}})

    assert "podman run --rm -it" in reproducer(res("podman"), "s.py", None)
    assert "docker run --rm -it" in reproducer(res("docker"), "s.py", None)
    local = reproducer(res("local"), "s.py", None)
    assert "run --rm" not in local and "the interpreter of image a" in local


def test_gpus_by_cdi_name() -> None:
    assert device_request_kwargs("0", "cdi") == {"driver": "cdi",
                                                 "device_ids": ["nvidia.com/gpu=0"]}
    assert device_request_kwargs("all", "cdi")["device_ids"] == ["nvidia.com/gpu=all"]
    assert device_request_kwargs("1") == {"device_ids": ["1"], "capabilities": [["gpu"]]}
