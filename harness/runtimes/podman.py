"""Run cells as podman containers through its Docker-compatible API (`DockerRuntime`);
what differs is here: socket, rlimits, CDI GPUs, cgroup readings (`CgroupWatch`), wait."""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness import gpu
from harness.errors import EngineUnavailable, GpuUnavailable
from harness.gpu.engine import CDI_KIND
from harness.matrixfile.model import Cell
from harness.runtimes.base import Check, cpu_pressure
from harness.runtimes.docker import DockerRuntime
from harness.runtimes.dockerengine import ENGINE_ERRORS, connect
from harness.runtimes.local import FILES, counter, memory_cgroups, memory_now, read_int
from harness.runtimes.local import ROOT as CGROUP_ROOT

CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))
START_FIX = ("start podman's Docker-compatible service: `podman system service --time=0 "
             "{url} &` (or `systemctl enable --now podman.socket`), or set "
             "HARNESS_PODMAN_HOST to the socket it serves")
INSTALL_FIX = "install podman (`apt-get install podman catatonit`), or use `runtime: docker`"
CDI_FIX = ("generate the NVIDIA CDI spec: `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` "
           "(nvidia-container-toolkit), or set `gpu: [none]`")
COMPAT_CDI_FIX = ("where the host has GPUs and a CDI spec, this podman's Docker-compatible "
                  "API passed no CDI device on (podman 4.3 ignores a DeviceRequest; "
                  "`podman run --device nvidia.com/gpu=0` works): "
                  "use a podman whose compat API takes CDI DeviceRequests, or `runtime: "
                  "docker` for GPU cells")
WAIT_POLL = "50ms"     # how often podman's wait looks: how late a cell's end may be seen


def default_socket() -> str:
    """The socket podman's service listens on, as a unix:// URL."""
    for var in ("HARNESS_PODMAN_HOST", "CONTAINER_HOST"):
        if os.environ.get(var):
            return os.environ[var]
    if os.geteuid() == 0:
        return "unix:///run/podman/podman.sock"
    run = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.geteuid()}"
    return f"unix://{run}/podman/podman.sock"


def own_limits() -> tuple[tuple[str, int, int], ...]:
    """(name, soft, hard) of our RLIMIT_NOFILE and RLIMIT_NPROC: what a container may get."""
    out = []
    for name, kind in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC)):
        soft, hard = resource.getrlimit(kind)
        if kind == resource.RLIMIT_NPROC:
            try:
                pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
            except (OSError, ValueError):
                pid_max = hard
            hard = pid_max if hard == resource.RLIM_INFINITY else min(hard, pid_max)
        if hard == resource.RLIM_INFINITY:
            continue   # nothing to keep within: podman's default is allowed
        soft = hard if soft == resource.RLIM_INFINITY else min(soft, hard)
        out.append((name, soft, hard))
    return tuple(out)


def cdi_specs(dirs: tuple[Path, ...] = CDI_DIRS) -> list[Path]:
    """The CDI spec files that declare NVIDIA GPUs (`kind: nvidia.com/gpu`)."""
    found = []
    for d in dirs:
        files = sorted(d.glob("*.yaml")) + sorted(d.glob("*.json")) if d.is_dir() else []
        for path in files:
            try:
                if CDI_KIND in path.read_text(errors="replace"):
                    found.append(path)
            except OSError:
                continue
    return found


def setup_checks(wants_gpu: bool, dirs: tuple[Path, ...] = CDI_DIRS) -> list[Check]:
    """What this machine lacks for podman's GPU cells: a CDI spec."""
    out: list[Check] = []
    if wants_gpu:
        specs = cdi_specs(dirs)
        if specs:
            out.append(("ok", f"CDI spec for {CDI_KIND}: {', '.join(map(str, specs))}", ""))
        else:
            out.append(("FAIL", f"no CDI spec for {CDI_KIND} under "
                                f"{' or '.join(map(str, dirs))}", CDI_FIX))
    return out


def cgroup_oom_file(pid: int, proc: Path = Path("/proc"),
                    root: Path = CGROUP_ROOT) -> Path | None:
    """The file that counts OOM kills in process `pid`'s memory cgroup; None if gone."""
    try:
        lines = (proc / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return None
    return _oom_file_in(memory_cgroups(lines, root))


def _oom_file_in(dirs: Iterable[tuple[Path, int]]) -> Path | None:
    """The OOM-kill counter file of the first of `dirs` that has one, or None."""
    for here, version in dirs:
        found = here / FILES[version]["events"]
        if found.exists():
            return found
    return None


# libpod's default cgroup parents, with the cgroupfs manager and with systemd's.
LIBPOD_CGROUPS = ("libpod_parent/libpod-{cid}", "machine.slice/libpod-{cid}.scope")


def container_oom_file(cid: str, root: Path | None = None) -> Path | None:
    """`cgroup_oom_file` of container `cid`, found by id (a short cell may be gone before
    the engine answers); or None."""
    base = CGROUP_ROOT if root is None else root
    return _oom_file_in((path, version) for rel in LIBPOD_CGROUPS
                        for path, version in ((base / "memory" / rel.format(cid=cid), 1),
                                              (base / rel.format(cid=cid), 2)))


def oom_kills(path: Path) -> int | None:
    """The `oom_kill` count in a memory.oom_control / memory.events file; None: gone."""
    return counter(path, "oom_kill") if path.exists() else None


PEAK_FILES = ("memory.max_usage_in_bytes", "memory.peak", "memory.current")


class CgroupWatch:
    """A container's OOM kills and peak (every `every_s`) and memory samples (every
    `sample_s`) read from its cgroup: podman's stats are too coarse and costly."""

    def __init__(self, counter: Path, every_s: float = 0.01, sample_s: float = 1.0,
                 start: float | None = None):
        self.counter, self.every_s, self.sample_s = counter, every_s, sample_s
        self.version = next(v for v, f in FILES.items() if f["events"] == counter.name)
        self.start = time.monotonic() if start is None else start
        self.peak_file = next((counter.parent / n for n in PEAK_FILES
                               if (counter.parent / n).exists()), None)
        self.kills = 0
        self.peak: int | None = None
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        # The first sample now, before the thread runs: a short cell may end first.
        self._due = time.monotonic()
        if self._read():
            self._sample()
            self._due += self.sample_s
        self._thread.start()

    def _read(self) -> bool:
        n = oom_kills(self.counter)
        if n is None:
            return False   # the cgroup is gone: the last readings stand
        self.kills = max(self.kills, n)
        peak = read_int(self.peak_file) if self.peak_file is not None else None
        if peak is not None:
            self.peak = max(self.peak or 0, peak)
        return True

    def _sample(self) -> None:
        now = time.monotonic()
        memory = memory_now(self.counter.parent, self.version)
        if memory is not None:
            self.samples.append({"t": round(now - self.start, 3), **memory,
                                 **cpu_pressure()})

    def _run(self) -> None:
        due = self._due
        while self._read():
            if time.monotonic() >= due:
                self._sample()
                while due <= time.monotonic():   # late (a busy host): the next is due
                    due += self.sample_s          # on the grid, not at once
            if self._stop.wait(self.every_s):
                return

    def __call__(self) -> tuple[bool, int | None]:
        """Stop the watch: (an OOM kill seen, the peak memory in bytes)."""
        self._stop.set()
        self._thread.join(timeout=1.0)
        self._read()
        return self.kills > 0, self.peak


class PodmanRuntime(DockerRuntime):
    """`runtime: podman`: a `DockerRuntime` on podman's Docker-compatible socket."""

    name = "podman"
    product = "Podman"

    def __init__(self, base_url: str | None = None, copy_files: bool | None = None):
        super().__init__(base_url or default_socket(), copy_files)
        self.own_ulimits = own_limits()

    @property
    def client(self) -> Any:
        """docker-py on podman's socket.

        Raises:
            EngineUnavailable: podman is not installed or its service does not answer.
        """
        if self._client is None:
            try:
                self._client = connect(self.base_url)
            except EngineUnavailable as exc:
                if shutil.which("podman") is None and self.local:
                    raise EngineUnavailable(f"podman is not installed (nothing answers at "
                                            f"{self.base_url})\n  fix: {INSTALL_FIX}") from exc
                first = str(exc).splitlines()[0].replace("Docker engine", "podman service")
                raise EngineUnavailable(
                    f"{first}\n  fix: {START_FIX.format(url=self.base_url)}") from exc
        return self._client

    def wait_stopped(self, cid: str) -> None:
        """Podman's own wait (its Docker-compatible one busies a CPU of the service)."""
        api = self.client.api
        res = api._post(api._url("/libpod/containers/{0}/wait", cid), timeout=None,
                        params={"condition": ["stopped", "exited"], "interval": WAIT_POLL})
        api._raise_for_status(res)

    def watch_cgroup(self, cid: str, start: float) -> CgroupWatch | None:
        """A watch of the container's memory cgroup (a local engine's; else None)."""
        if not self.local:
            return None
        path = container_oom_file(cid)
        if path is None:      # a parent of the service's own: found through the process
            try:
                pid = int(self.client.api.inspect_container(cid)["State"].get("Pid") or 0)
            except (*ENGINE_ERRORS, EngineUnavailable, ValueError):
                return None
            path = cgroup_oom_file(pid) if pid > 0 else None
        return CgroupWatch(path, start=start) if path is not None else None

    def setup_checks(self, wants_gpu: bool) -> list[Check]:
        return setup_checks(wants_gpu) if self.local else []

    def engine_key(self) -> str:
        """Its socket's address: podman's `docker info` is slow to ask."""
        url = self.base_url or default_socket()
        return "podman-" + hashlib.sha256(url.encode()).hexdigest()[:16]

    def check(self, cells: list[Cell]) -> None:
        """As docker's, with a CDI spec required for GPU cells on this machine."""
        _ = self.client   # connecting pings it: EngineUnavailable where nothing answers
        if self.local and any(c.gpu.wants_gpu for c in cells) and not cdi_specs():
            raise GpuUnavailable(f"the matrix asks for GPUs but podman has no CDI spec for "
                                 f"{CDI_KIND}\n  fix: {CDI_FIX}")
        super().check(cells)

    def gpu_inventory(self, image: str, python: str = "python3") -> gpu.HostGpus:
        try:
            return super().gpu_inventory(image, python)
        except GpuUnavailable as exc:
            first = str(exc).splitlines()[0]
            if "saw no GPU" not in first:
                raise
            raise GpuUnavailable(f"{first}\n  fix: {COMPAT_CDI_FIX}") from exc
