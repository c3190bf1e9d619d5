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
import re
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
from harness.gpu.hostsample import HostGpuSampler
from harness.pressure import cpu_pressure
from harness.runtimes import process
from harness.runtimes.base import (
    AGENT_DIR,
    LABEL,
    ImageInfo,
    Progress,
    RunOutcome,
    RunRequest,
    RuntimeBase,
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


class PullLayers:
    """Pull progress by layer, from the engine's pull events."""

    def __init__(self) -> None:
        self.layers: dict[str, tuple[str, int, int]] = {}   # id -> (status, done, total)

    def add(self, event: dict[str, Any]) -> None:
        lid, status = event.get("id"), str(event.get("status") or "")
        if not lid or ":" in str(lid) or status.startswith(("Pulling from", "Digest", "Status")):
            return
        detail = event.get("progressDetail") or {}
        _, done, total = self.layers.get(lid, ("", 0, 0))
        if detail.get("total"):
            done, total = int(detail.get("current") or 0), int(detail["total"])
        self.layers[lid] = (status, done, total)

    def summary(self) -> str:
        n = len(self.layers)
        complete = sum(1 for st, _, _ in self.layers.values()
                       if st in ("Pull complete", "Already exists"))
        done = sum(d for st, d, _ in self.layers.values() if st == "Downloading")
        total = sum(t for st, _, t in self.layers.values() if st == "Downloading")
        text = f"{complete}/{n} layers done"
        if total:
            text += f", downloading {done / 1e6:.0f}/{total / 1e6:.0f} MB"
        return text


def _engine_text(exc: BaseException) -> str:
    """The engine's own words, without docker-py's 'NNN Client Error for http+docker://...'."""
    text = str(getattr(exc, "explanation", None) or exc).strip()
    text = re.sub(r"^\d{3} \w+ Error for \S+: \w[\w ]*\(\"?(.*?)\"?\)$", r"\1", text)
    text = re.sub(r"\s+", " ", text)
    return text[:200]


def pull_failure(ref: str, exc: BaseException) -> str:
    """One line of why `ref` could not be pulled, then the fix that fits this kind of image."""
    said = _engine_text(exc)
    low = said.lower()
    if any(k in low for k in ("manifest unknown", "not found", "does not exist", "404")):
        why = f"image {ref} not found in its registry (no such repository or tag)"
    elif any(k in low for k in ("unauthorized", "denied", "authentication")):
        why = f"image {ref}: the registry refused access (login needed?)"
    elif any(k in low for k in ("no such host", "dial tcp", "timeout", "connection refused",
                                "network is unreachable", "temporary failure")):
        why = f"image {ref} is not on the engine and its registry cannot be reached"
    else:
        why = f"image {ref} is not on the engine and could not be pulled"
    text = f"{why} ({said})" if said else why
    if ref.startswith("harness-test/"):
        fix = "build the offline test images: `harness images build`"
    else:
        fix = (f"check the tag exists, or `docker pull {ref}` (or `docker login`) on a host "
               "with registry access, then `docker save | docker load` here")
    return f"{text}\n  fix: {fix}"


def split_ref(ref: str) -> tuple[str, str]:
    """`repo[:tag]` or `repo@sha256:...` -> (repo, tag or digest) for the pull API, by
    docker-py's own parser (a registry port, `host:5000/x`, is not a tag)."""
    repo, tag = docker.utils.parse_repository_tag(ref)
    return repo, tag or "latest"


class DockerRuntime(RuntimeBase):
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
        self._gpus: gpu.HostGpus | None = None

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
                if (url or os.environ.get("DOCKER_HOST") or "").startswith("ssh://"):
                    from harness.runtimes.dockerlib import enable_ssh

                    enable_ssh()
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
        # The engine decides, not this machine: probe it with a GPU image it already has
        # (a missing toolkit stops the sweep here, exit 3); else judge from `docker info`.
        for c in cells:
            if c.gpu.wants_gpu and self.image_labels(c.image.ref) is not None:
                self.gpu_inventory(c.image.ref, c.image.python or "python3")
                return
        local = self._is_local
        if local and not gpu.host_has_gpu() and gpu.engine_gpu_support(info) is None:
            raise GpuUnavailable(
                f"the matrix asks for GPU {', '.join(wants)} but this host has no NVIDIA GPU "
                "or driver (no /proc/driver/nvidia/gpus, no /dev/nvidiactl).\n  fix: run the "
                "sweep on a GPU host with the NVIDIA driver and nvidia-container-toolkit, or "
                "set `gpu: [none]` for a CPU-only sweep")
        if gpu.engine_gpu_support(info) is None and not local:
            raise GpuUnavailable("the engine offers no NVIDIA runtime or CDI devices.\n  fix: "
                                 "install nvidia-container-toolkit and restart dockerd")

    def gpu_inventory(self, image: str, python: str = "python3") -> gpu.HostGpus:
        """This engine's GPUs, as a probe container in `image` sees them (once per engine).

        Raises:
            GpuUnavailable: the engine refuses GPU requests, or gives a container none.
        """
        if self._gpus is None:
            from harness.gpu import engine as gpuprobe

            where = self.base_url or os.environ.get("DOCKER_HOST", "the default socket")
            found = gpuprobe.engine_inventory(self.client, image, python,
                                              not self.copy_files, where)
            if not found.gpus:
                raise GpuUnavailable(
                    f"the engine at {where} started a GPU container but it saw no GPU: "
                    f"{found.reason}\n  fix: {gpuprobe.TOOLKIT_FIX}")
            self._gpus = found
        return self._gpus

    def prepare(self, image: ImageSpec, progress: Progress) -> ImageInfo:
        start = time.monotonic()
        try:
            img = self.client.images.get(image.ref)
        except docker.errors.ImageNotFound:
            img = self._pull(image.ref, progress)
        except ENGINE_ERRORS as exc:
            raise EngineUnavailable(f"engine error looking up {image.ref}: "
                                    f"{_engine_text(exc)}") from exc
        digests = img.attrs.get("RepoDigests") or []
        env = tuple((img.attrs.get("Config") or {}).get("Env") or ())
        return ImageInfo(ref=image.ref, digest=digests[0] if digests else img.id,
                         labels=dict(img.labels or {}), python=image.python or "python3",
                         prepare_s=time.monotonic() - start, env=env)

    def _pull(self, ref: str, progress: Progress) -> Any:
        repo, tag = split_ref(ref)
        progress(f"pulling {ref} ...")
        last = 0.0
        layers = PullLayers()
        try:
            for event in self.client.api.pull(repo, tag=tag, stream=True,
                                              decode=True):
                if "error" in event:
                    raise docker.errors.APIError(event["error"])
                layers.add(event)
                if time.monotonic() - last > 2:
                    last = time.monotonic()
                    progress(f"pull {ref}: {layers.summary()}")
            return self.client.images.get(ref)
        except ENGINE_ERRORS as exc:
            raise ImageUnavailable(pull_failure(ref, exc)) from exc

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
            poll = 0.02   # short cells end within a few polls: start fast, back off
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
                time.sleep(poll)
                poll = min(POLL_S, poll * 1.5)
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

    def pullable(self, ref: str, timeout_s: float = 30.0) -> str | None:
        """None when the engine's registry has `ref` (its manifest answers: the sweep can
        pull it), else why not, with the fix (`pull_failure`). Nothing is pulled; the
        question is time-boxed, as an unreachable registry can hang the engine's call."""
        if ref.startswith("harness-test/"):     # built here, never in a registry
            return pull_failure(ref, RuntimeError("built locally, not in a registry"))
        found: list[BaseException | None] = []

        def ask() -> None:
            try:
                self.client.api.inspect_distribution(ref)
                found.append(None)
            except Exception as exc:  # any failure: not pullable, and said
                found.append(exc)

        t = threading.Thread(target=ask, daemon=True, name="registry-check")
        t.start()
        t.join(timeout_s)
        if not found:
            return pull_failure(ref, TimeoutError(f"no answer from its registry in "
                                                  f"{timeout_s:.0f} s (timeout)"))
        exc = found[0]
        return None if exc is None else pull_failure(ref, exc)

    def image_labels(self, tag: str) -> dict[str, str] | None:
        try:
            return dict(self.client.images.get(tag).labels or {})
        except docker.errors.ImageNotFound:
            return None

    def import_tar(self, data: io.BufferedReader, tag: str) -> None:
        repo, _, t = tag.rpartition(":")
        self.client.api.import_image_from_stream(data, repository=repo, tag=t)
