"""Backends that run cells, chosen by name (`runtime:` in the matrix)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from harness.errors import EnvironmentUnavailable
from harness.matrixfile.load import check_applied, check_images
from harness.matrixfile.model import Cell, Matrix, abilities
from harness.runtimes.base import Progress, Runtime

# The factories by name, handed on: `Engines` and every caller but a Slurm job's cell
# reach `get_runtime` through the package (where the tests patch it).
from harness.runtimes.factories import FACTORIES as FACTORIES
from harness.runtimes.factories import NAMES as NAMES
from harness.runtimes.factories import get_runtime as get_runtime

if TYPE_CHECKING:
    from harness.runtimes.docker import DockerRuntime


@dataclass
class Engines:
    """The runtime of each host a matrix names: one, unless `hosts:` lists endpoints.

    `start` removes what a crashed harness left behind and checks that the cells can
    run (raising EnvironmentUnavailable: exit 3 before any results directory exists);
    `stop` removes what this harness left.
    """

    default: Runtime
    by_host: dict[str, Runtime] | None = None

    @classmethod
    def for_matrix(cls, matrix: Matrix, name: str,
                   docker_host: str | None = None) -> Engines:
        """Raises: InputError: unknown runtime name; SpecError: a setting the runtime cannot
        honour (mem_limit where cells have no cgroup of their own)."""
        check_images(matrix, name)
        if matrix.slurm is not None:
            # Cells become Slurm jobs; `name` runs each one inside its job.
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
        """Each runtime cleaned up and checked for its cells, then readied for them (a
        dated image's day resolved): what cannot run stops here, before any cell."""
        for label, rt in self.each().items():
            rt.cleanup()
            mine = [c for c in cells if not label or c.host.label == label]
            rt.check(mine)
            rt.resolve_ahead(mine, progress or (lambda _: None))

    def hybrid_client(self, runtime: str) -> Any:
        """The engine client that builds `harness culprit`'s hybrid images (None on the
        local runtime, whose hybrids are venvs).

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
        """`stop` once the block ends, however it ends; then `then` (a store's unlock),
        even where stopping failed."""
        try:
            yield
        finally:
            try:
                self.stop()
            finally:
                then()
