"""Backends that run cells, chosen by name (`runtime:` in the matrix)."""

from __future__ import annotations

from harness.errors import InputError
from harness.runtimes.base import Runtime

NAMES = ("docker", "local")


def get_runtime(name: str, docker_host: str | None = None) -> Runtime:
    """The runtime called `name`.

    Raises:
        InputError: unknown name (the message lists the allowed values).
    """
    if name == "local":
        from harness.runtimes.local import LocalRuntime

        return LocalRuntime()
    if name == "docker":
        from harness.runtimes.docker import DockerRuntime

        return DockerRuntime(docker_host)
    raise InputError(f"unknown runtime {name!r}; allowed values: {', '.join(NAMES)}")
