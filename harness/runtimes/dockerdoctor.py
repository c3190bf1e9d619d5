"""What `harness doctor` asks of an engine with the Docker API (dockerd, podman's
service), answered by the runtime that drives it: doctor never tests which runtime it
has (`cli.doctor.Engine` is what it needs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness import gpu
from harness.matrixfile.model import DEFAULT_RUNTIME
from harness.runtimes.base import Capabilities
from harness.runtimes.factories import get_runtime


class DockerEngine:
    """An engine with the Docker API (dockerd, podman's service) as a runtime sees it."""

    def __init__(self, url: str | None, runtime: str = DEFAULT_RUNTIME):
        # lazy: docker-py only where a Docker engine is asked for (runtimes.get_runtime
        # imports it first, paramiko hidden)
        from harness.runtimes.docker import DockerRuntime

        rt = get_runtime(runtime, url)
        assert isinstance(rt, DockerRuntime), f"runtime {runtime} has no Docker API"
        self.rt = rt

    @property
    def capabilities(self) -> Capabilities:
        return self.rt.capabilities

    def setup_checks(self, wants_gpu: bool) -> list[tuple[str, str, str]]:
        """What this machine lacks for the runtime before its engine is asked."""
        return self.rt.setup_checks(wants_gpu)

    def info(self) -> Mapping[str, Any]:
        info: Mapping[str, Any] = self.rt.client.info()
        return info

    def image_config(self, ref: str) -> Mapping[str, Any] | None:
        labels = self.rt.image_labels(ref)
        if labels is None:
            return None
        config = self.rt.client.images.get(ref).attrs.get("Config") or {}
        return {"labels": labels, "env": config.get("Env") or []}

    def pullable(self, ref: str) -> str | None:
        return self.rt.pullable(ref)

    def gpu_inventory(self, ref: str) -> gpu.HostGpus:
        """The engine's GPUs as a probe container in image `ref` sees them."""
        return self.rt.gpu_inventory(ref)
