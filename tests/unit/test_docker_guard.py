"""tests/conftest.py's guards: unmarked tests cannot reach Docker; marked ones skip or fail."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import docker
import pytest

from harness.runtimes.docker import DockerRuntime

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"
NO_ENGINE = "unix:///nonexistent/harness-test-docker.sock"


@pytest.fixture
def guard(root_conftest: ModuleType) -> ModuleType:
    return root_conftest


def test_unmarked_test_cannot_call_from_env() -> None:
    with pytest.raises(RuntimeError, match=r"not marked @pytest\.mark\.docker"):
        docker.from_env()


def test_unmarked_test_cannot_build_a_client() -> None:
    with pytest.raises(RuntimeError, match="test_unmarked_test_cannot_build_a_client"):
        docker.DockerClient(base_url=NO_ENGINE)
    with pytest.raises(RuntimeError, match="not marked"):
        docker.DockerClient.from_env()


def test_the_docker_runtime_is_guarded_too() -> None:
    # the guard's error is not an engine error, so it is not mapped to "no engine"
    with pytest.raises(RuntimeError, match="not marked"):
        DockerRuntime(NO_ENGINE).client  # noqa: B018


def test_missing_engine_skips_by_default(guard: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                        request: pytest.FixtureRequest) -> None:
    monkeypatch.delenv("HARNESS_REQUIRE_DOCKER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no Docker engine: refused"):
        guard._engine_missing(request.node, "refused")


def test_missing_engine_fails_when_required(guard: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                           request: pytest.FixtureRequest) -> None:
    monkeypatch.setenv("HARNESS_REQUIRE_DOCKER", "1")
    with pytest.raises(pytest.fail.Exception, match="HARNESS_REQUIRE_DOCKER=1, but none answers"):
        guard._engine_missing(request.node, "refused")


def test_gpu_present(guard: ModuleType, tmp_path: Path) -> None:
    assert not guard.gpu_present(tmp_path / "missing")
    assert not guard.gpu_present(tmp_path)
    (tmp_path / "0000:01:00.0").mkdir()
    assert guard.gpu_present(tmp_path)


MARKED = '''
import pytest


@pytest.mark.docker
def test_needs_engine():
    pass


@pytest.mark.gpu
def test_needs_gpu():
    pass


def test_plain():
    pass
'''


@pytest.mark.parametrize(("require", "expected"), [
    ("0", "no Docker engine: DockerException"),
    ("1", "ERROR test_marked.py::test_needs_engine"),  # fails in setup: an error
])
def test_marked_tests_end_to_end(tmp_path: Path, require: str, expected: str) -> None:
    # GIVEN a project with this conftest, a docker test and no engine answering
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "test_marked.py").write_text(MARKED)
    (tmp_path / "pytest.ini").write_text(textwrap.dedent("""\
        [pytest]
        addopts = --strict-markers -p no:cacheprovider
        markers =
            docker: engine
            gpu: gpu
            slow: slow
        """))
    env = {"PATH": "/usr/bin:/bin", "DOCKER_HOST": NO_ENGINE, "HARNESS_REQUIRE_DOCKER": require}
    # WHEN pytest runs it
    proc = subprocess.run([sys.executable, "-m", "pytest", "-rA", str(tmp_path)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env=env)
    # THEN the docker test skips, or fails loudly when the engine is required
    text = proc.stdout + proc.stderr
    assert expected in text, text
    assert "PASSED test_marked.py::test_plain" in text
    if require == "1":
        assert proc.returncode == 1
        assert "needs a Docker engine and HARNESS_REQUIRE_DOCKER=1" in text
    else:
        assert proc.returncode == 0, text
    if not Path("/proc/driver/nvidia/gpus").exists():
        assert "no NVIDIA GPU (/proc/driver/nvidia/gpus is empty or missing)" in text


def test_missing_podman_skips_by_default(guard: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                         request: pytest.FixtureRequest) -> None:
    monkeypatch.delenv("HARNESS_REQUIRE_PODMAN", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no podman service: refused"):
        guard._podman_missing(request.node, "refused")


def test_missing_podman_fails_when_required(guard: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                            request: pytest.FixtureRequest) -> None:
    monkeypatch.setenv("HARNESS_REQUIRE_PODMAN", "1")
    with pytest.raises(pytest.fail.Exception,
                       match="HARNESS_REQUIRE_PODMAN=1, but its service does not answer"):
        guard._podman_missing(request.node, "refused")


def test_the_podman_runtime_is_guarded_too() -> None:
    from harness.runtimes.podman import PodmanRuntime

    with pytest.raises(RuntimeError, match="not marked"):
        PodmanRuntime(NO_ENGINE).client  # noqa: B018
