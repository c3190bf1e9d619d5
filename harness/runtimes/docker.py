"""Run cells as Docker containers: `DockerRuntime`, one engine's runtime.

It wires the `docker*` modules, the only ones that import `docker`: the engine's client
(`dockerengine`), its images (`dockerimage`: prepare, pull, build, registry question)
and one cell's container (`dockercontainer`). Here: whether the engine can run the
matrix's cells (`check`, the GPUs it gives containers), and `cleanup`, which removes
the containers whose owner process is gone, so Ctrl-C, an error or a crashed harness
never leaves one running.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import docker.errors
from docker.types import DeviceRequest, Ulimit

from harness import gpu
from harness.errors import EngineUnavailable, GpuUnavailable
from harness.gpu import engine as gpuprobe
from harness.matrixfile.model import Cell, ImageSpec, is_local_endpoint
from harness.runtimes import dockerimage, process
from harness.runtimes.base import LABEL, ImageInfo, Progress, RunOutcome, RunRequest, RuntimeBase
from harness.runtimes.dockercontainer import OWNER, CgroupReadings, run_container, start_time
from harness.runtimes.dockerengine import ENGINE_ERRORS, connect, where
from harness.runtimes.dockerimage import PullLayers, pull_failure, split_ref
from harness.runtimes.local import cache_dir

# The image helpers were first defined here; callers still read them from here.
__all__ = ["DockerRuntime", "PullLayers", "pull_failure", "split_ref"]


class DockerRuntime(RuntimeBase):
    name = "docker"
    product = "Docker"
    probes_gpus = True      # a probe container in a matrix image lists the engine's GPUs
    builds_hybrids = True   # culprit's hybrid images, built offline (`dockerhybrid`)
    own_ulimits: tuple[tuple[str, int, int], ...] = ()  # the engine's defaults serve

    def __init__(self, base_url: str | None = None, copy_files: bool | None = None):
        self.base_url = base_url
        # Bind mounts need the engine on this machine; a tcp:// or ssh:// engine gets
        # the files copied in and out instead (HARNESS_DOCKER_COPY=1 forces it).
        if copy_files is None:
            copy_files = (os.environ.get("HARNESS_DOCKER_COPY") == "1"
                          or not is_local_endpoint(base_url))
        self.copy_files = copy_files
        self._client: Any = None
        self.memlock_refused = False
        self._gpus: gpu.HostGpus | None = None
        self._info: dict[str, Any] | None = None

    @property
    def client(self) -> Any:
        """The docker-py client, connected lazily.

        Raises:
            EngineUnavailable: no engine answers at DOCKER_HOST / base_url.
        """
        if self._client is None:
            self._client = connect(self.base_url)
        return self._client

    @property
    def local(self) -> bool:
        """The engine runs on this machine (its GPUs, PSI and files are ours)."""
        return is_local_endpoint(self.base_url)

    def engine_info(self) -> dict[str, Any]:
        """The engine's `docker info`, asked once a connection (podman takes ~0.2 s)."""
        if self._info is None:
            self._info = self.client.info()
        return self._info

    def check(self, cells: list[Cell]) -> None:
        self.memlock_refused = self.memlock_refused or self._memlock_file().exists()
        wants = sorted({c.gpu.value for c in cells if c.gpu.wants_gpu})
        if not wants:
            return
        # The engine decides, not this machine: probe it with a GPU image it already has
        # (a missing toolkit stops the sweep here, exit 3); else judge from `docker info`.
        for c in cells:
            if c.gpu.wants_gpu and self.image_labels(c.image.ref) is not None:
                self.gpu_inventory(c.image.ref, c.image.python or "python3")
                return
        offered = gpu.engine_gpu_support(self.engine_info())
        if self.local and not gpu.host_has_gpu() and offered is None:
            raise GpuUnavailable(
                f"the matrix asks for GPU {', '.join(wants)} but this host has no NVIDIA GPU "
                "or driver (no /proc/driver/nvidia/gpus, no /dev/nvidiactl).\n  fix: run the "
                "sweep on a GPU host with the NVIDIA driver and nvidia-container-toolkit, or "
                "set `gpu: [none]` for a CPU-only sweep")
        if offered is None and not self.local:
            raise GpuUnavailable("the engine offers no NVIDIA runtime or CDI devices.\n  fix: "
                                 "install nvidia-container-toolkit and restart dockerd")

    def gpu_inventory(self, image: str, python: str = "python3") -> gpu.HostGpus:
        """This engine's GPUs, as a probe container in `image` sees them (once per engine).

        Raises:
            GpuUnavailable: the engine refuses GPU requests, or gives a container none.
        """
        if self._gpus is None:
            every = DeviceRequest(**gpu.device_request_kwargs("all", self.gpu_by))
            found = gpuprobe.engine_inventory(self.client, image, python,
                                              not self.copy_files, where(self.base_url),
                                              every, [Ulimit(name=n, soft=s, hard=h)
                                                      for n, s, h in self.own_ulimits])
            if not found.gpus:
                raise GpuUnavailable(
                    f"the engine at {where(self.base_url)} started a GPU container but it "
                    f"saw no GPU: {found.reason}\n  fix: {gpuprobe.TOOLKIT_FIX}")
            self._gpus = found
        return self._gpus

    def prepare(self, image: ImageSpec, progress: Progress) -> ImageInfo:
        return dockerimage.image_info(self.client, image, progress)

    def run(self, request: RunRequest, progress: Progress) -> RunOutcome:
        return run_container(self, request, progress)

    def wait_stopped(self, cid: str) -> None:
        """dockerd's wait, which returns the moment the container stops."""
        self.client.api.wait(cid, timeout=None)

    def watch_cgroup(self, cid: str, start: float) -> CgroupReadings | None:
        """dockerd reports OOMKilled and streams stats each second: nothing to watch."""
        return None

    def lost(self) -> None:
        """An engine call failed mid-run: connect again next time (it may have restarted)."""
        self._client = None
        self._info = None

    def engine_key(self) -> str:
        """A name for this engine that lasts across runs: its `docker info` ID."""
        return str(self.engine_info().get("ID", "default"))

    def _memlock_file(self) -> Path:
        """Where this engine's refusal is remembered (by `engine_key`)."""
        engine = self.engine_key().replace(":", "_").replace("/", "_")
        return cache_dir() / "engines" / f"{engine}.memlock-refused"

    def refuse_memlock(self) -> None:
        """Unprivileged engines (rootless, sandboxes) cannot raise RLIMIT_MEMLOCK: use
        their default from now on, and remember it for this engine across runs."""
        self.memlock_refused = True
        try:
            path = self._memlock_file()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("engine refused memlock=-1\n")
        except OSError:
            pass

    def remove(self, cid: str) -> None:
        """Remove a container, running or not; an engine error leaves it to `cleanup`."""
        try:
            self.client.api.remove_container(cid, force=True)
        except docker.errors.NotFound:
            pass
        except (*ENGINE_ERRORS, EngineUnavailable):
            pass  # cleanup() on the next start removes it by label

    def cleanup(self) -> int:
        """Remove labelled containers whose owning harness process is gone; count them."""
        removed = 0
        host = socket.gethostname()
        try:
            found = self.client.containers.list(all=True, filters={"label": LABEL})
        except (*ENGINE_ERRORS, EngineUnavailable):
            return 0
        for c in found:
            owner = (c.labels or {}).get("harness.owner", "")
            name, _, rest = owner.partition(":")
            pid, _, started = rest.partition(":")
            mine = owner == OWNER
            orphan = name == host and pid.isdigit() and (
                not process.alive(int(pid)) or (started and started != start_time(int(pid))))
            if mine or orphan:
                self.remove(c.id)
                removed += 1
        return removed

    def build(self, context: Path, tag: str, labels: dict[str, str], progress: Progress) -> str:
        """`docker build` of a directory with no network; returns the image id.

        Raises:
            ImageUnavailable: the build failed (its last log lines are in the message).
        """
        return dockerimage.build(self.client, context, tag, labels, progress)

    def pullable(self, ref: str, timeout_s: float = 30.0) -> str | None:
        """None when the engine's registry has `ref`, else why not, with the fix
        (`dockerimage.pullable`: nothing is pulled, the question is time-boxed)."""
        return dockerimage.pullable(lambda: self.client, ref, timeout_s)

    def image_labels(self, tag: str) -> dict[str, str] | None:
        return dockerimage.image_labels(self.client, tag)

    def image_config(self, ref: str) -> dict[str, Any] | None:
        """{"labels": {...}, "env": ["K=V", ...]} of an image on the engine, None when
        absent (what `harness doctor` reads of it)."""
        return dockerimage.image_config(self.client, ref)
