"""Run cells as Docker containers: `DockerRuntime`, and one cell as one container
(`run_container`, with the NGC flags). The deadline is kept here (`container.wait` has
only an HTTP timeout), and containers are labelled with their owner (`OWNER`) so
`cleanup` removes orphans. Only the `docker*` modules import `docker`.
"""

from __future__ import annotations

import io
import os
import socket
import tarfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import docker.errors
from docker.types import DeviceRequest, Ulimit

from harness import gpu
from harness.errors import EngineUnavailable, GpuUnavailable, ImageUnavailable
from harness.gpu import engine as gpuprobe
from harness.gpu.host import HostGpuSampler
from harness.matrixfile.model import Cell, ImageSpec, is_local_endpoint
from harness.runtimes import dockerengine, process
from harness.runtimes.base import (
    AGENT_DIR,
    LABEL,
    ImageInfo,
    Progress,
    RunOutcome,
    RunRequest,
    RuntimeBase,
    cpu_pressure,
    parse_size,
)
from harness.runtimes.dockerengine import ENGINE_ERRORS, connect, where
from harness.runtimes.local import cache_dir


class DockerRuntime(RuntimeBase):
    name = "docker"
    product = "Docker"
    probes_gpus = True      # a probe container in a matrix image lists the engine's GPUs
    builds_hybrids = True   # culprit's hybrid images, built offline (`dockerengine.hybrid`)
    own_ulimits: tuple[tuple[str, int, int], ...] = ()  # the engine's defaults serve

    def __init__(self, base_url: str | None = None, copy_files: bool | None = None):
        self.base_url = base_url
        # Bind mounts need a local engine; a remote one gets the files copied.
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
        """The engine's `docker info`, asked once a connection (it is slow on podman)."""
        if self._info is None:
            self._info = self.client.info()
        return self._info

    def check(self, cells: list[Cell]) -> None:
        self.memlock_refused = self.memlock_refused or self._memlock_file().exists()
        wants = sorted({c.gpu.value for c in cells if c.gpu.wants_gpu})
        if not wants:
            return
        # The engine decides: probe it with a GPU image it has, else read `docker info`.
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
        return dockerengine.image_info(self.client, image, progress)

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
        """Use the engine's default memlock from now on, remembered across runs."""
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
        return dockerengine.build(self.client, context, tag, labels, progress)

    def pullable(self, ref: str, timeout_s: float = 30.0) -> str | None:
        """None when the engine's registry has `ref`, else why not (`dockerengine.pullable`)."""
        return dockerengine.pullable(lambda: self.client, ref, timeout_s)

    def image_labels(self, tag: str) -> dict[str, str] | None:
        return dockerengine.image_labels(self.client, tag)

    def image_config(self, ref: str) -> dict[str, Any] | None:
        """{"labels": {...}, "env": ["K=V", ...]} of an image on the engine; None: absent."""
        return dockerengine.image_config(self.client, ref)


# ---------------------------------------------- one cell as one container

def start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "?"


# host:pid:start — a later process reusing the pid is not taken for a live owner.
OWNER = f"{socket.gethostname()}:{os.getpid()}:{start_time(os.getpid())}"
STACK_BYTES = 64 * 1024 * 1024
POLL_S = 0.1
SIGKILLED = 137            # the exit code of a process the kernel killed with SIGKILL (128 + 9)
OOM_LATE_S = 3.0           # how long dockerd's record of an OOM kill is waited for
OOM_POLL_S = 0.25


class CgroupReadings(Protocol):
    """A watch of a container's memory cgroup (`Engine.watch_cgroup`)."""

    samples: list[dict[str, Any]]   # as `_stats` gives them: no stats stream is asked

    def __call__(self) -> tuple[bool, int | None]:
        """Stops the watch: (an OOM kill seen, the peak in bytes)."""


class Engine(Protocol):
    """What running a container needs of its runtime (`DockerRuntime` is one)."""

    copy_files: bool          # a remote engine: files copied in and out, not mounted
    memlock_refused: bool     # the engine refuses memlock=-1: its default is used
    own_ulimits: tuple[tuple[str, int, int], ...]   # (name, soft, hard) besides ours

    @property
    def client(self) -> Any: ...

    @property
    def local(self) -> bool: ...

    @property
    def gpu_by(self) -> str:
        """How a GPU is requested (gpu.device_request_kwargs)."""

    def refuse_memlock(self) -> None:
        """Remember that the engine refuses memlock=-1."""

    def lost(self) -> None:
        """An engine call failed mid-run: connect again next time."""

    def remove(self, cid: str) -> None:
        """Remove the container, whatever state it is in."""

    def wait_stopped(self, cid: str) -> None:
        """Return once the container has stopped; raise where the engine cannot say."""

    def watch_cgroup(self, cid: str, start: float) -> CgroupReadings | None:
        """A watch of the container's memory cgroup; None: the engine's stats serve."""


def tar_inputs(scenario_dir: Path) -> bytes:
    """A tar of harness/agent/*.py, the scenario's directory and an empty harness/out."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in sorted(AGENT_DIR.glob("*.py")):
            tar.add(path, arcname=f"harness/agent/{path.name}")
        tar.add(scenario_dir, arcname="harness/scenario",
                filter=lambda t: None if "__pycache__" in t.name else t)
        out = tarfile.TarInfo("harness/out")
        out.type = tarfile.DIRTYPE
        out.mode = 0o777
        tar.addfile(out)
    return buf.getvalue()


def ulimits(memlock_refused: bool, own: tuple[tuple[str, int, int], ...] = ()) -> list[Any]:
    limits = [Ulimit(name="stack", soft=STACK_BYTES, hard=STACK_BYTES),
              *(Ulimit(name=name, soft=soft, hard=hard) for name, soft, hard in own)]
    if not memlock_refused:
        limits.insert(0, Ulimit(name="memlock", soft=-1, hard=-1))
    return limits


def container_kwargs(request: RunRequest, engine: Engine) -> dict[str, Any]:
    """docker-py's `containers.create` arguments for the cell."""
    cell, s = request.cell, request.cell.settings
    script = cell.scenario.script
    args = request.agent_args("/harness/agent/agent.py", f"/harness/scenario/{script.name}",
                              "/harness/out/samples.jsonl",
                              f"/harness/out/{request.control.name}")
    kwargs: dict[str, Any] = {
        "command": [request.image.python, *args],
        "labels": {LABEL: "1", "harness.owner": OWNER, "harness.cell": cell.id,
                   "harness.host": socket.gethostname(), "harness.pid": str(os.getpid())},
        "environment": request.environment(),
        "volumes": {} if engine.copy_files else {
            str(AGENT_DIR): {"bind": "/harness/agent", "mode": "ro"},
            str(script.parent): {"bind": "/harness/scenario", "mode": "ro"},
            str(request.outdir.resolve()): {"bind": "/harness/out", "mode": "rw"}},
        "working_dir": "/harness/scenario",
        "shm_size": s.shm_size,
        "ulimits": ulimits(engine.memlock_refused, engine.own_ulimits),
        "detach": True,
        # tini as PID 1: signals reach the agent and zombies are reaped.
        "init": True,
    }
    if not s.network:
        kwargs["network_disabled"] = True
        kwargs["network_mode"] = "none"
    limit = parse_size(s.mem_limit)
    if limit is not None:
        kwargs["mem_limit"] = limit
        kwargs["memswap_limit"] = limit  # no swap: over the limit is an OOM kill
    if cell.gpu.wants_gpu:
        kwargs["device_requests"] = [DeviceRequest(**gpu.device_request_kwargs(
            cell.gpu.value, engine.gpu_by))]
    return kwargs


def run_container(engine: Engine, request: RunRequest, progress: Progress) -> RunOutcome:
    """Run the cell's container to its end, deadline or cancel; remove it. Engine lost: `error`.

    Raises: ImageUnavailable: the image vanished; KeyboardInterrupt: cancelled (removed too).
    """
    cell, s = request.cell, request.cell.settings
    kwargs = container_kwargs(request, engine)
    outcome = RunOutcome(exit_code=None, mem_limit_bytes=parse_size(s.mem_limit))
    container = None
    gpu_sampler: HostGpuSampler | None = None
    start = time.monotonic()
    try:
        container = _create(engine, request, kwargs)
        if cell.gpu.wants_gpu and engine.local:
            gpu_sampler = HostGpuSampler(cell.gpu.value, s.sample_interval).start()
        try:
            container.start()
        except docker.errors.APIError as exc:
            if "error setting rlimit" not in str(exc) or engine.memlock_refused:
                raise
            engine.refuse_memlock()
            progress("engine refuses memlock=-1 (NGC flag); running with its default")
            engine.remove(container.id)
            kwargs["ulimits"] = ulimits(engine.memlock_refused, engine.own_ulimits)
            container = _create(engine, request, kwargs)
            container.start()
        cgroup = engine.watch_cgroup(container.id, start)
        if engine.memlock_refused:
            outcome.details["memlock"] = "engine refused -1; engine default used"
        stats: list[dict[str, Any]] = cgroup.samples if cgroup is not None else []
        t_stats = None if cgroup is not None else threading.Thread(
            target=_stats, args=(container, stats, start, engine.local), daemon=True)
        if t_stats is not None:
            t_stats.start()
        stopped = _waiter(engine, container.id)
        poll = 0.02   # short cells end within a few polls
        while True:
            if stopped.is_set():   # the engine said it stopped (or its wait failed: poll)
                state = engine.client.api.inspect_container(container.id)["State"]
                if _exited(state):
                    break
                time.sleep(poll)
            else:
                stopped.wait(poll)
            if request.cancelled():
                kill(container)
                raise KeyboardInterrupt  # the finally below removes the container
            if time.monotonic() - start > s.timeout:
                outcome.timed_out = kill(container)
                state = _wait_exit(engine.client, container.id)
                break
            poll = min(POLL_S, poll * 1.5)
        outcome.duration_s = time.monotonic() - start
        outcome.exit_code = state.get("ExitCode")
        oom_seen, peak = cgroup() if cgroup is not None else (False, None)
        outcome.oom_killed = bool(state.get("OOMKilled")) or oom_seen or (
            state.get("ExitCode") == SIGKILLED and not outcome.timed_out
            and _oom_late(engine.client, container.id, state))
        if t_stats is not None:   # the stream only ends when the container is removed
            t_stats.join(timeout=0.05)
        outcome.host_samples = list(stats)
        if stats or peak is not None:
            outcome.details["host_max_usage"] = max([int(x.get("max_usage") or x["usage"])
                                                     for x in stats] + [peak or 0])
        if engine.copy_files:
            fetch_out(container, request.outdir)
        logs = container.logs(tail=200)
        outcome.log_tail = logs.decode("utf-8", "replace") if isinstance(logs, bytes) else ""
        (request.outdir / "agent.log").write_text(outcome.log_tail, encoding="utf-8")
    except docker.errors.ImageNotFound as exc:
        raise ImageUnavailable(f"image {request.image.ref} vanished: {exc}") from exc
    except (*ENGINE_ERRORS, EngineUnavailable) as exc:
        outcome.error = f"engine error: {str(exc)[:500]}"
        outcome.duration_s = time.monotonic() - start
        engine.lost()  # reconnect next time: the engine may have restarted
    finally:
        if gpu_sampler is not None:
            outcome.details["host_gpu"] = gpu_sampler.stop()
            outcome.details["host_gpu_reason"] = gpu_sampler.reason
        if container is not None:
            engine.remove(container.id)
    return outcome


def kill(container: Any) -> bool:
    """Kill the container; False where it had exited already (no engine error)."""
    try:
        container.kill()
    except docker.errors.APIError as exc:
        if exc.status_code == 409 or "running" in str(exc.explanation or exc):
            return False
        raise
    return True


def _create(engine: Engine, request: RunRequest, kwargs: dict[str, Any]) -> Any:
    container = engine.client.containers.create(request.image.ref, **kwargs)
    if engine.copy_files:
        # A remote engine cannot see our files: copy them in (no live early stop).
        container.put_archive("/", tar_inputs(request.cell.scenario.script.parent))
    return container


def fetch_out(container: Any, outdir: Path) -> None:
    """Copy /harness/out back from a remote container (even a killed one)."""
    try:
        stream, _ = container.get_archive("/harness/out")
    except docker.errors.NotFound:
        return
    data = io.BytesIO(b"".join(stream))
    with tarfile.open(fileobj=data) as tar:
        for member in tar.getmembers():
            name = Path(member.name)
            # Only plain files directly under out/: nothing may escape the cell's directory.
            if not member.isfile() or len(name.parts) != 2 or name.parts[0] != "out":
                continue
            src = tar.extractfile(member)
            if src is not None:
                (outdir / name.name).write_bytes(src.read())


def _epoch(stamp: str) -> int:
    """The whole seconds since the epoch of an engine's RFC 3339 UTC time stamp."""
    return int(datetime.fromisoformat(stamp[:19] + "+00:00").timestamp())


def _oom_event(client: Any, cid: str, state: dict[str, Any], until: int | None = None) -> bool:
    """Whether the engine logged an `oom` event for the container over its run (to
    `until`, else its end); False where it cannot say."""
    try:
        events = client.events(since=_epoch(state["StartedAt"]) - 1,
                               until=until or _epoch(state["FinishedAt"]) + 1,
                               filters={"container": cid, "event": "oom"}, decode=True)
        return any((e.get("Action") or e.get("status")) == "oom" for e in events)
    except (*ENGINE_ERRORS, KeyError, ValueError, TypeError):
        return False


def _oom_late(client: Any, cid: str, state: dict[str, Any]) -> bool:
    """Whether a container SIGKILLed before its deadline was OOM-killed: its `oom` event
    or `OOMKilled`, asked again for `OOM_LATE_S`, since dockerd may record either after
    the exit shows (a busy host: a kill at the memory limit read `not OOMKilled`). A kill
    from outside waits that long once."""
    deadline = time.monotonic() + OOM_LATE_S
    until = None
    while True:
        if _oom_event(client, cid, state, until):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(OOM_POLL_S)
        until = int(time.time()) + 1
        try:
            if client.api.inspect_container(cid)["State"].get("OOMKilled"):
                return True
        except (*ENGINE_ERRORS, KeyError, TypeError):
            return False


def _exited(state: dict[str, Any]) -> bool:
    return not state.get("Running") and state.get("Status") in ("exited", "dead")


def _waiter(engine: Engine, cid: str) -> threading.Event:
    """An event set when the engine's wait returns: stopped, or failed (then poll)."""
    stopped = threading.Event()

    def wait() -> None:
        try:
            engine.wait_stopped(cid)
        except Exception:  # any failure: the caller polls the state instead
            pass
        finally:
            stopped.set()

    threading.Thread(target=wait, daemon=True, name=f"wait-{cid[:12]}").start()
    return stopped


def _wait_exit(client: Any, cid: str) -> dict[str, Any]:
    for _ in range(100):
        state: dict[str, Any] = client.api.inspect_container(cid)["State"]
        if not state.get("Running"):
            return state
        time.sleep(POLL_S)
    return state


def _stats(container: Any, out: list[dict[str, Any]], start: float, psi: bool) -> None:
    """Host-side cgroup memory from the engine's stats stream; `psi`: CPU pressure too."""
    try:
        for st in container.stats(stream=True, decode=True):
            mem = st.get("memory_stats") or {}
            if "usage" in mem:
                out.append({"t": round(time.monotonic() - start, 3), "usage": mem["usage"],
                            "max_usage": mem.get("max_usage"),
                            "limit": mem.get("limit"),
                            "rss": (mem.get("stats") or {}).get("rss"),
                            **(cpu_pressure() if psi else {})})
            elif out:
                return  # the container has stopped
    except Exception:  # best effort: the stream breaks in many ways when the engine goes
        return
