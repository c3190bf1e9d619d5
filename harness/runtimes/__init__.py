"""Backends that run cells, chosen by name (`runtime:`): one lazy factory per name
(`FACTORIES`, `get_runtime`), and the runtime of each host a matrix names (`Engines`).

docker-py loads without paramiko and requests' charset detector, which cost start-up
time that only an ssh:// engine needs (`dockerengine.enable_ssh`)."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from harness.errors import EnvironmentUnavailable, InputError
from harness.matrixfile.load import check_applied, check_images
from harness.matrixfile.model import RUNTIMES, Cell, Matrix, abilities
from harness.runtimes.base import Progress, Runtime

if TYPE_CHECKING:
    from harness.runtimes.docker import DockerRuntime

HIDDEN = ("paramiko", "charset_normalizer", "chardet")


@contextmanager
def paramiko_hidden() -> Iterator[None]:
    """Hide paramiko and the charset detector while the block imports docker-py."""
    hidden = [] if "docker" in sys.modules else [n for n in HIDDEN if n not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # importing it: ImportError
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Unable to find acceptable character")
            yield
    finally:
        for name in hidden:
            del sys.modules[name]


def _local(docker_host: str | None) -> Runtime:
    # lazy: the local runtime only where a cell runs on it
    from harness.runtimes.local import LocalRuntime

    return LocalRuntime()


def _docker(docker_host: str | None) -> Runtime:
    with paramiko_hidden():
        # lazy: docker-py only for a docker or podman runtime, paramiko hidden
        from harness.runtimes.docker import DockerRuntime

    return DockerRuntime(docker_host)


def _podman(podman_host: str | None) -> Runtime:
    with paramiko_hidden():
        # lazy: docker-py only for a docker or podman runtime, paramiko hidden
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


def job_cell(argv: list[str]) -> int:
    """`harness _cell SPEC.json`: one cell inside a Slurm job (`runtimes.slurm.main`)."""
    # lazy: Slurm's modules only for the hidden `_cell` command (inside a Slurm job)
    from harness.runtimes.slurm import main

    return main(argv, get_runtime)


@dataclass
class Engines:
    """The runtime of each host a matrix names: one, unless `hosts:` lists endpoints.

    `start` cleans up and checks the cells can run (exit 3 before any results exist).
    """

    default: Runtime
    by_host: dict[str, Runtime] | None = None

    @classmethod
    def for_matrix(cls, matrix: Matrix, name: str,
                   docker_host: str | None = None) -> Engines:
        """Raises: InputError: unknown runtime name; SpecError: a setting the runtime
        cannot honour."""
        check_images(matrix, name)
        if matrix.slurm is not None:
            # lazy: Slurm's modules only for a matrix with `slurm:`
            from harness.runtimes.slurm import SlurmRuntime

            if name not in NAMES:
                get_runtime(name)  # the "allowed values" error

            check_applied(matrix, name)
            return cls(SlurmRuntime(name, matrix.slurm, matrix.name, docker_host))
        default = get_runtime(name, docker_host)

        check_applied(matrix, default.name)
        by_host = None
        if len(matrix.hosts) > 1 or matrix.hosts[0].url is not None:
            # `hosts:` passed validation: the matrix's runtime serves them.
            serves = name if abilities(name).serves_hosts else matrix.runtime
            by_host = {h.label: get_runtime(serves, h.url) for h in matrix.hosts}
        return cls(default, by_host)

    def runtime_for(self, cell: Cell) -> Runtime:
        """The runtime (host) that runs `cell`."""
        return (self.by_host or {}).get(cell.host.label, self.default)

    def each(self) -> dict[str, Runtime]:
        """Host label -> runtime; "" stands for every host when there is one runtime."""
        return self.by_host or {"": self.default}

    def start(self, cells: list[Cell], progress: Progress | None = None) -> None:
        """Clean up, check and ready each runtime: what cannot run stops before any cell."""
        for label, rt in self.each().items():
            rt.cleanup()
            mine = [c for c in cells if not label or c.host.label == label]
            rt.check(mine)
            rt.resolve_ahead(mine, progress or (lambda _: None))

    def hybrid_client(self, runtime: str) -> Any:
        """The engine client that builds `harness culprit`'s hybrid images (None on local).

        Raises:
            EnvironmentUnavailable: a container runtime whose engine builds none.
        """
        if not abilities(runtime).container_images:
            return None
        if not self.default.capabilities.builds_hybrids:
            raise EnvironmentUnavailable(
                f"runtime {runtime}: its engine builds no hybrid images\n  fix: run "
                "harness culprit with --runtime docker, or sweep on `runtime: local`")
        return cast("DockerRuntime", self.default).client    # podman's is one too

    def stop(self) -> None:
        for rt in self.each().values():
            rt.cleanup()

    @contextmanager
    def stopped(self, then: Callable[[], None] = lambda: None) -> Iterator[None]:
        """`stop` when the block ends, then `then` (a store's unlock) even if stop fails."""
        try:
            yield
        finally:
            try:
                self.stop()
            finally:
                then()
