"""Each runtime by its name (`runtime:` in the matrix): one factory per name, each loading
its runtime's modules on first use. The package hands `get_runtime` on; a Slurm job's
cell (`runtimes.slurm`) takes it from here, as the package loads Slurm's modules."""

from __future__ import annotations

from collections.abc import Callable

from harness.errors import InputError
from harness.matrixfile.model import RUNTIMES
from harness.runtimes.base import Runtime
from harness.runtimes.dockerlib import import_docker


def _local(docker_host: str | None) -> Runtime:
    # lazy: the local runtime (venvs, the resolver, the host's GPUs) only where a cell runs
    # on it: report, history and explain read `runtimes.base` without it
    from harness.runtimes.local import LocalRuntime

    return LocalRuntime()


def _docker(docker_host: str | None) -> Runtime:
    import_docker()  # without paramiko: ~130 ms less start-up
    # lazy: docker-py only for a docker or podman runtime, after import_docker hid paramiko
    from harness.runtimes.docker import DockerRuntime

    return DockerRuntime(docker_host)


def _podman(podman_host: str | None) -> Runtime:
    import_docker()
    # lazy: docker-py only for a docker or podman runtime, after import_docker hid paramiko
    from harness.runtimes.podman import PodmanRuntime

    return PodmanRuntime(podman_host)


# One factory per name of `matrixfile.model.RUNTIMES` (tests/unit/test_architecture.py checks).
FACTORIES: dict[str, Callable[[str | None], Runtime]] = {"local": _local, "docker": _docker,
                                                         "podman": _podman}
NAMES = RUNTIMES


def get_runtime(name: str, docker_host: str | None = None) -> Runtime:
    """The runtime called `name`.

    Raises:
        InputError: unknown name (the message lists the allowed values).
    """
    factory = FACTORIES.get(name)
    if factory is None:
        raise InputError(f"unknown runtime {name!r}; allowed values: {', '.join(NAMES)}")
    return factory(docker_host)
