"""A host's GPUs as its Docker engine gives them to containers: a short probe container
(the cell's image, every GPU requested) runs the agent's NVML reader, so any engine,
remote too, shows its own GPUs. Also the engine's GPU mechanisms and a DeviceRequest."""

from __future__ import annotations

import contextlib
import io
import json
import tarfile
import time
from collections.abc import Mapping
from typing import Any

from harness.errors import EngineUnavailable, GpuUnavailable
from harness.gpu.cuda import parse_cuda_version
from harness.gpu.host import Gpu, HostGpus
from harness.protocol import AGENT_DIR

PROBE_TIMEOUT_S = 60.0
CDI_KIND = "nvidia.com/gpu"     # the CDI device kind of NVIDIA GPUs
NO_DRIVER = ("could not select device driver", "unknown or invalid runtime name: nvidia")
TOOLKIT_FIX = ("install nvidia-container-toolkit on that host and restart dockerd "
               "(`nvidia-ctk runtime configure --runtime=docker`), point DOCKER_HOST / "
               "`hosts:` at a GPU host, or set `gpu: [none]` for a CPU-only sweep")


def parse(output: str) -> HostGpus:
    """The probe's stdout (an image's entrypoint banner may come first) -> HostGpus."""
    found: dict[str, Any] | None = None
    for line in output.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                found = json.loads(line)
            except ValueError:
                continue
    if found is None:
        return HostGpus(reason=f"the NVML probe printed no result: {output[-300:]!r}")
    if "devices" not in found:
        return HostGpus(reason=str(found.get("reason") or "NVML unavailable in the probe"))
    gpus = [Gpu(int(d["index"]), str(d.get("name") or "?"), str(d.get("uuid") or "?"),
                    (int(d["cc"][0]), int(d["cc"][1])) if d.get("cc") else None,
                    d.get("memory_total"))
            for d in found["devices"]]
    return HostGpus(driver=found.get("driver"),
                        cuda_driver=parse_cuda_version(found.get("cuda_driver")),
                        gpus=gpus)


def _agent_tar() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in sorted(AGENT_DIR.glob("*.py")):
            tar.add(path, arcname=f"harness/agent/{path.name}")
    return buf.getvalue()


def engine_inventory(client: Any, image: str, python: str, mount: bool,
                     where: str, device_request: Any,
                     ulimits: list[Any] | None = None) -> HostGpus:
    """Run the NVML probe in `image` on the engine behind `client` (docker-py).

    Args:
        mount, ulimits: Bind-mount the agent (local engine), else copy it; Ulimits (podman).
        device_request: The caller's all-GPU DeviceRequest (only the runtime imports docker).

    Raises: GpuUnavailable: the engine refuses GPU requests (no NVIDIA device driver);
    EngineUnavailable: the probe container could not be created.
    """
    kwargs: dict[str, Any] = {
        "command": [python, "/harness/agent/readers.py"],
        "device_requests": [device_request],
        "network_disabled": True, "network_mode": "none",
        "labels": {"harness.probe": "nvml"},
        "detach": True,
    }
    if ulimits:
        kwargs["ulimits"] = ulimits
    if mount:
        kwargs["volumes"] = {str(AGENT_DIR): {"bind": "/harness/agent", "mode": "ro"}}
    try:
        container = client.containers.create(image, **kwargs)
    except Exception as exc:  # docker.errors.*, requests: the engine's own words
        raise EngineUnavailable(f"the engine at {where} could not create the GPU probe "
                                f"container from {image}: {str(exc)[:300]}") from exc
    try:
        if not mount:
            container.put_archive("/", _agent_tar())
        try:
            container.start()
        except Exception as exc:  # docker.errors.APIError: the engine's own words
            text = str(exc)
            if any(s in text for s in NO_DRIVER):
                raise GpuUnavailable(
                    f"the engine at {where} cannot give containers GPUs: {text[:300]}\n"
                    f"  fix: {TOOLKIT_FIX}") from exc
            raise GpuUnavailable(f"the GPU probe container on {where} did not start: "
                                 f"{text[:400]}\n  fix: {TOOLKIT_FIX}") from exc
        deadline = time.monotonic() + PROBE_TIMEOUT_S
        while time.monotonic() < deadline:
            container.reload()
            if container.status in ("exited", "dead"):
                break
            time.sleep(0.1)
        out = container.logs(stdout=True, stderr=False)
        text = out.decode("utf-8", "replace") if isinstance(out, bytes) else str(out)
        return parse(text)
    finally:
        with contextlib.suppress(Exception):  # best effort; labelled for a later look
            container.remove(force=True)


def describe(host: HostGpus) -> str:
    """`2x NVIDIA GeForce RTX 3090 (8.6), driver 525.147.05, CUDA 12.0` or the reason."""
    if not host.gpus:
        return host.reason or "no GPU"
    names: dict[str, int] = {}
    for g in host.gpus:
        cc = f" ({g.cc[0]}.{g.cc[1]})" if g.cc else ""
        names[g.name + cc] = names.get(g.name + cc, 0) + 1
    text = ", ".join(f"{n}x {k}" for k, n in names.items())
    if host.driver:
        text += f", driver {host.driver}"
    if host.cuda_driver:
        text += f", CUDA {host.cuda_driver[0]}.{host.cuda_driver[1]}"
    return text


def device_request_kwargs(value: str, by: str = "device-request") -> dict[str, Any]:
    """Arguments for docker.types.DeviceRequest selecting `value` ("all", index, UUID):
    `by` "cdi" names the CDI device `nvidia.com/gpu=VALUE` (podman), else the NVIDIA
    driver's request (Docker's `--gpus`)."""
    if by == "cdi":
        return {"driver": "cdi", "device_ids": [f"{CDI_KIND}={value}"]}
    if value == "all":
        return {"count": -1, "capabilities": [["gpu"]]}
    return {"device_ids": [value], "capabilities": [["gpu"]]}


def engine_gpu_mechanisms(info: Mapping[str, Any], hook_found: bool = False) -> list[str]:
    """How this engine can give a container GPUs, from `docker info` (empty: none seen):
    `nvidia` runtime, CDI devices, or `--gpus` (only a local check sees: `hook_found`)."""
    found = []
    if "nvidia" in (info.get("Runtimes") or {}):
        found.append("nvidia runtime")
    cdi = [d.get("ID", "") for d in info.get("DiscoveredDevices") or []
           if d.get("Source") == "cdi" and str(d.get("ID", "")).startswith("nvidia.com/gpu")]
    if cdi:
        found.append(f"CDI ({len(cdi)} nvidia.com/gpu devices)")
    if hook_found:
        found.append("--gpus (nvidia-container-runtime-hook)")
    return found


def engine_gpu_support(info: Mapping[str, Any]) -> str | None:
    """From `docker info`: the first GPU mechanism the engine offers, or None (CDI spec
    directories alone count, so a remote engine is not refused)."""
    found = engine_gpu_mechanisms(info)
    if not found and info.get("CDISpecDirs"):
        found.append("CDI")
    return found[0] if found else None
