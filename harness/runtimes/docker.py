"""Run a cell as a Docker container. The only module that imports `docker`.

Containers get the NGC flags (shm 1g, memlock -1, stack 64 MiB), GPUs through a
DeviceRequest, no network unless asked, the agent and the scenario's directory mounted
read-only and the cell's output directory read-write. `container.wait(timeout)` is only
an HTTP timeout, so the deadline is ours: we poll the state and kill. Every container
carries labels naming its owner process, so Ctrl-C, an error or a crashed harness never
leaves one running: `cleanup()` removes those whose owner is gone.
"""

from __future__ import annotations

import io
import os
import socket
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests.exceptions
from docker.types import DeviceRequest, Ulimit

from harness import gpu
from harness.errors import EngineUnavailable, GpuUnavailable, ImageUnavailable
from harness.hostsample import HostGpuSampler
from harness.pressure import cpu_pressure
from harness.runtimes import process
from harness.runtimes.base import (
    AGENT_DIR,
    LABEL,
    ImageInfo,
    Progress,
    RunOutcome,
    RunRequest,
    parse_size,
)
from harness.spec.model import Cell, ImageSpec, is_local_endpoint


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "?"


# host:pid:start — a later process reusing the pid is not taken for a live owner.
OWNER = f"{socket.gethostname()}:{os.getpid()}:{_start_time(os.getpid())}"
STACK_BYTES = 64 * 1024 * 1024
POLL_S = 0.1
ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)
NO_ENGINE_FIX = ("start the engine (`dockerd --iptables=false --bridge=none &` on this kind of "
                 "machine, or `systemctl start docker`), check DOCKER_HOST, or use "
                 "`runtime: local` in the matrix")


def _tar_inputs(scenario_dir: Path) -> bytes:
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


class DockerRuntime:
    name = "docker"

    def __init__(self, base_url: str | None = None, copy_files: bool | None = None):
        self.base_url = base_url
        # Bind mounts need the engine on this machine; a tcp:// or ssh:// engine gets
        # the files copied in and out instead (HARNESS_DOCKER_COPY=1 forces it).
        if copy_files is None:
            copy_files = (os.environ.get("HARNESS_DOCKER_COPY") == "1"
                          or not is_local_endpoint(base_url))
        self.copy_files = copy_files
        self._client: Any = None
        self._memlock_refused = False

    @property
    def client(self) -> Any:
        """The docker-py client, connected lazily.

        Raises:
            EngineUnavailable: no engine answers at DOCKER_HOST / base_url.
        """
        if self._client is None:
            try:
                url = self.base_url
                if url and "://" not in url:  # a docker context name
                    ctx = docker.ContextAPI.get_context(url)
                    if ctx is None:
                        raise EngineUnavailable(f"no docker context named {url!r}\n  fix: "
                                                "`docker context ls`, or give an endpoint URL")
                    url = ctx.Host
                # ssh:// goes through paramiko: the ssh CLI transport costs ~0.8 s per
                # API call (measured on loopback) against ~0.06 s.
                client = (docker.DockerClient(base_url=url, timeout=120) if url
                          else docker.from_env(timeout=120))
                client.ping()
            except ENGINE_ERRORS as exc:
                where = self.base_url or os.environ.get("DOCKER_HOST", "the default socket")
                raise EngineUnavailable(f"no Docker engine answers at {where}: {exc}\n"
                                        f"  fix: {NO_ENGINE_FIX}") from exc
            self._client = client
        return self._client

    def check(self, cells: list[Cell]) -> None:
        info = self.client.info()
        self._memlock_refused = self._memlock_refused or self._memlock_file().exists()
        wants = sorted({c.gpu.value for c in cells if c.gpu.wants_gpu})
        if not wants:
            return
        local = self._is_local
        if local and not gpu.host_has_gpu():
            raise GpuUnavailable(
                f"the matrix asks for GPU {', '.join(wants)} but this host has no NVIDIA GPU "
                "or driver (no /proc/driver/nvidia/gpus, no /dev/nvidiactl).\n  fix: run the "
                "sweep on a GPU host with the NVIDIA driver and nvidia-container-toolkit, or "
                "set `gpu: [none]` for a CPU-only sweep")
        if gpu.engine_gpu_support(info) is None and not local:
            raise GpuUnavailable("the engine offers no NVIDIA runtime or CDI devices.\n  fix: "
                                 "install nvidia-container-toolkit and restart dockerd")

    def prepare(self, image: ImageSpec, progress: Progress) -> ImageInfo:
        start = time.monotonic()
        try:
            img = self.client.images.get(image.ref)
        except docker.errors.ImageNotFound:
            img = self._pull(image.ref, progress)
        except ENGINE_ERRORS as exc:
            raise EngineUnavailable(f"engine error looking up {image.ref}: {exc}") from exc
        digests = img.attrs.get("RepoDigests") or []
        env = tuple((img.attrs.get("Config") or {}).get("Env") or ())
        return ImageInfo(ref=image.ref, digest=digests[0] if digests else img.id,
                         labels=dict(img.labels or {}), python=image.python or "python3",
                         prepare_s=time.monotonic() - start, env=env)

    def _pull(self, ref: str, progress: Progress) -> Any:
        repo, _, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "")
        progress(f"pulling {ref} ...")
        last = 0.0
        try:
            for event in self.client.api.pull(repo, tag=tag or "latest", stream=True,
                                              decode=True):
                if "error" in event:
                    raise docker.errors.APIError(event["error"])
                if time.monotonic() - last > 5:
                    last = time.monotonic()
                    progress(f"pull {ref}: {event.get('status', '')} {event.get('progress', '')}")
            return self.client.images.get(ref)
        except ENGINE_ERRORS as exc:
            raise ImageUnavailable(
                f"image {ref} is not present on the engine and could not be pulled: "
                f"{str(exc)[:300]}\n  fix: `docker pull {ref}` on a host with registry "
                "access (then `docker save | docker load`), or build the test images with "
                "`python -m harness images build`") from exc

    def run(self, request: RunRequest, progress: Progress) -> RunOutcome:
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
            "volumes": {} if self.copy_files else {
                str(AGENT_DIR): {"bind": "/harness/agent", "mode": "ro"},
                str(script.parent): {"bind": "/harness/scenario", "mode": "ro"},
                str(request.outdir.resolve()): {"bind": "/harness/out", "mode": "rw"}},
            "working_dir": "/harness/scenario",
            "shm_size": s.shm_size,
            "ulimits": self._ulimits(),
            "detach": True,
            # tini as PID 1: signals reach the agent and zombies of forked children are
            # reaped (the agent as PID 1 ignores signals it has no handler for).
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
                cell.gpu.value))]
        outcome = RunOutcome(exit_code=None, mem_limit_bytes=limit)
        container = None
        gpu_sampler: HostGpuSampler | None = None
        start = time.monotonic()
        try:
            container = self._create(request, kwargs)
            if cell.gpu.wants_gpu and self._is_local:
                # Host-side NVML per device, first reading before the container starts.
                gpu_sampler = HostGpuSampler(cell.gpu.value, s.sample_interval).start()
            try:
                container.start()
            except docker.errors.APIError as exc:
                if "error setting rlimit" not in str(exc) or self._memlock_refused:
                    raise
                # Unprivileged engines (rootless, sandboxes) cannot raise RLIMIT_MEMLOCK.
                self._memlock_refused = True
                self._remember_memlock()
                progress("engine refuses memlock=-1 (NGC flag); running with its default")
                self._remove(container.id)
                kwargs["ulimits"] = self._ulimits()
                container = self._create(request, kwargs)
                container.start()
            if self._memlock_refused:
                outcome.details["memlock"] = "engine refused -1; engine default used"
            stats: list[dict[str, Any]] = []
            t_stats = threading.Thread(target=self._stats, args=(container, stats, start),
                                       daemon=True)
            t_stats.start()
            while True:
                state = self.client.api.inspect_container(container.id)["State"]
                if not state.get("Running") and state.get("Status") in ("exited", "dead"):
                    break
                if request.cancelled():
                    container.kill()
                    raise KeyboardInterrupt  # the finally below removes the container
                if time.monotonic() - start > s.timeout:
                    outcome.timed_out = True
                    container.kill()
                    state = self._wait_exit(container.id)
                    break
                time.sleep(POLL_S)
            outcome.duration_s = time.monotonic() - start
            outcome.exit_code = state.get("ExitCode")
            outcome.oom_killed = bool(state.get("OOMKilled"))
            # The stats stream only ends when the container is removed; don't wait on it.
            t_stats.join(timeout=0.05)
            outcome.host_samples = list(stats)
            if stats:
                outcome.details["host_max_usage"] = max(int(x.get("max_usage") or x["usage"])
                                                        for x in stats)
            if self.copy_files:
                self._fetch_out(container, request.outdir)
            logs = container.logs(tail=200)
            outcome.log_tail = logs.decode("utf-8", "replace") if isinstance(logs, bytes) else ""
            (request.outdir / "agent.log").write_text(outcome.log_tail, encoding="utf-8")
        except docker.errors.ImageNotFound as exc:
            raise ImageUnavailable(f"image {request.image.ref} vanished: {exc}") from exc
        except (*ENGINE_ERRORS, EngineUnavailable) as exc:
            # Lost mid-sweep (restart, cut connection): an outcome, not a harness abort.
            outcome.error = f"engine error: {str(exc)[:500]}"
            outcome.duration_s = time.monotonic() - start
            self._client = None  # reconnect next time: the engine may have restarted
        finally:
            if gpu_sampler is not None:
                outcome.details["host_gpu"] = gpu_sampler.stop()
                outcome.details["host_gpu_reason"] = gpu_sampler.reason
            if container is not None:
                self._remove(container.id)
        return outcome

    def _create(self, request: RunRequest, kwargs: dict[str, Any]) -> Any:
        container = self.client.containers.create(request.image.ref, **kwargs)
        if self.copy_files:
            # A remote engine cannot see our files: copy the agent and the scenario's
            # directory in before start (no live early stop: the control file and the
            # samples stay on the far side until the container exits).
            container.put_archive("/", _tar_inputs(request.cell.scenario.script.parent))
        return container

    def _fetch_out(self, container: Any, outdir: Path) -> None:
        """Copy /harness/out back from a remote container (even a killed one)."""
        try:
            stream, _ = container.get_archive("/harness/out")
        except docker.errors.NotFound:
            return
        data = io.BytesIO(b"".join(stream))
        with tarfile.open(fileobj=data) as tar:
            for member in tar.getmembers():
                name = Path(member.name)
                # Only plain files directly under out/: nothing a container wrote may
                # escape the cell's directory (links, "..", absolute names).
                if not member.isfile() or len(name.parts) != 2 or name.parts[0] != "out":
                    continue
                src = tar.extractfile(member)
                if src is not None:
                    (outdir / name.name).write_bytes(src.read())

    @property
    def _is_local(self) -> bool:
        return is_local_endpoint(self.base_url)

    def _memlock_file(self) -> Path:
        from harness.runtimes.local import cache_dir

        engine = str(self.client.info().get("ID", "default")).replace(":", "_").replace("/", "_")
        return cache_dir() / "engines" / f"{engine}.memlock-refused"

    def _remember_memlock(self) -> None:
        try:
            path = self._memlock_file()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("engine refused memlock=-1\n")
        except OSError:
            pass

    def _ulimits(self) -> list[Any]:
        limits = [Ulimit(name="stack", soft=STACK_BYTES, hard=STACK_BYTES)]
        if not self._memlock_refused:
            limits.insert(0, Ulimit(name="memlock", soft=-1, hard=-1))
        return limits

    def _wait_exit(self, cid: str) -> dict[str, Any]:
        for _ in range(100):
            state: dict[str, Any] = self.client.api.inspect_container(cid)["State"]
            if not state.get("Running"):
                return state
            time.sleep(POLL_S)
        return state

    def _stats(self, container: Any, out: list[dict[str, Any]], start: float) -> None:
        """Host-side cgroup memory from the engine's stats stream (1 Hz)."""
        psi = is_local_endpoint(self.base_url)   # this machine's PSI is the engine's
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

    def _remove(self, cid: str) -> None:
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
                not process.alive(int(pid)) or (started and started != _start_time(int(pid))))
            if mine or orphan:
                self._remove(c.id)
                removed += 1
        return removed

    def managed_containers(self) -> list[str]:
        return [c.id for c in self.client.containers.list(all=True, filters={"label": LABEL})]

    def build(self, context: Path, tag: str, labels: dict[str, str], progress: Progress) -> str:
        """`docker build` of a directory with no network; returns the image id.

        Raises:
            ImageUnavailable: the build failed (its last log lines are in the message).
        """
        tail: list[str] = []
        try:
            for chunk in self.client.api.build(path=str(context), tag=tag, labels=labels,
                                               network_mode="none", rm=True, decode=True,
                                               forcerm=True):
                text = (chunk.get("stream") or chunk.get("status") or "").rstrip()
                if "error" in chunk:
                    raise ImageUnavailable(f"building {tag}: {chunk['error']}\n" +
                                           "\n".join(tail[-10:]))
                if text:
                    tail.append(text)
                    if text.startswith("Step "):
                        progress(f"{tag}: {text}")
            img = self.client.images.get(tag)
        except ENGINE_ERRORS as exc:
            raise ImageUnavailable(f"building {tag} failed: {exc}") from exc
        return str(img.id)

    def image_labels(self, tag: str) -> dict[str, str] | None:
        try:
            return dict(self.client.images.get(tag).labels or {})
        except docker.errors.ImageNotFound:
            return None

    def import_tar(self, data: io.BufferedReader, tag: str) -> None:
        repo, _, t = tag.rpartition(":")
        self.client.api.import_image_from_stream(data, repository=repo, tag=t)
