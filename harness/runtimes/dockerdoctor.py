"""`harness doctor` for an engine with the Docker API: `Engine`, `engine_checks`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, cast

from harness import gpu
from harness.errors import HarnessError, InputError
from harness.gpu.engine import describe
from harness.matrixfile.model import DEFAULT_RUNTIME, Matrix, is_local_endpoint
from harness.runtimes import get_runtime
from harness.runtimes.base import Capabilities, Check

TOOLKIT_FIX = ("install nvidia-container-toolkit, run `nvidia-ctk runtime configure "
               "--runtime=docker` and restart dockerd")


class Engine(Protocol):
    """What doctor asks of an engine with the Docker API: its runtime, or a fake in tests."""

    @property
    def capabilities(self) -> Capabilities:
        """The runtime's declaration (`runtimes.base.Capabilities`)."""

    def setup_checks(self, wants_gpu: bool) -> list[Check]:
        """What this machine lacks for the runtime before its engine is asked."""

    def gpu_inventory(self, ref: str) -> gpu.HostGpus | None:
        """The engine's GPUs as a probe container in image `ref` sees them."""

    def engine_info(self) -> Mapping[str, Any]:
        """The engine's `docker info`."""

    def image_config(self, ref: str) -> Mapping[str, Any] | None:
        """{"labels": {...}, "env": ["K=V", ...]} of a local image, None when absent."""

    def pullable(self, ref: str) -> str | None:
        """None when the engine can pull `ref`, else why not and the fix; nothing is pulled."""


def docker_engine(url: str | None, runtime: str = DEFAULT_RUNTIME) -> Engine:
    """The runtime `runtime` (docker, podman) driving the engine at `url`, as the sweep's.

    Raises:
        InputError: a runtime without a Docker API engine (local, slurm).
    """
    rt = get_runtime(runtime, url)
    if not rt.capabilities.abilities.container_images:
        raise InputError(f"runtime {runtime} drives no engine with the Docker API")
    return cast("Engine", rt)       # its images are containers: docker's runtime, podman's


class _Lines(list[Check]):
    """The checks so far, added as the doctors' lines read."""

    def add(self, level: str, what: str, fix: str = "") -> None:
        self.append((level, what, fix))

    def failed(self, where: str, exc: HarnessError) -> None:
        """The engine at `where` failed: its error's first line, and its fix."""
        first, *rest = str(exc).splitlines()
        self.add("FAIL", f"{where}: {first}",
                 rest[-1].strip().removeprefix("fix: ") if rest else "")


def _probe(c: _Lines, engine: Engine, matrix: Matrix, where: str) -> gpu.HostGpus | None:
    """The engine's GPUs through a probe container in the first matrix image it has."""
    if not engine.capabilities.probes_gpus:
        return None
    for img in matrix.images:
        if engine.image_config(img.ref) is None:
            continue
        try:
            found = engine.gpu_inventory(img.ref)
        except HarnessError as exc:
            c.failed(where, exc)
            return None
        if found is None:
            return None
        c.add("ok", f"{where}: GPUs through the engine (probe in {img.label}): "
                    f"{describe(found)}")
        for g in found.gpus:
            cc = f"{g.cc[0]}.{g.cc[1]}" if g.cc else "?"
            c.add("ok", f"{where}: GPU {g.index}: {g.name}, compute capability {cc}, {g.uuid}")
        return found
    return None


def engine_checks(matrix: Matrix | None, label: str, url: str | None,
                  connect: Callable[[str | None], Engine], host: gpu.HostGpus,
                  has_gpu: bool, hook_found: bool, wants_gpu: bool) -> list[Check]:
    """`harness doctor`'s checks of one Docker API engine: it answers, its GPUs, and each
    image there and runnable, or pullable."""
    c = _Lines()
    _engine(c, matrix, label, url, connect, host, has_gpu, hook_found, wants_gpu)
    return c


def _engine(c: _Lines, matrix: Matrix | None, label: str, url: str | None,
            connect: Callable[[str | None], Engine], host: gpu.HostGpus,
            has_gpu: bool, hook_found: bool, wants_gpu: bool) -> None:
    where = f"engine {label}" + (f" ({url})" if url and url != label else "")
    local = is_local_endpoint(url)
    try:
        engine = connect(url)
        for level, what, fix in engine.setup_checks(wants_gpu):
            c.add(level, f"{where}: {what}", fix)
        info = engine.engine_info()   # no engine: the runtime's own words and fix
    except HarnessError as exc:
        c.failed(where, exc)
        return
    can = engine.capabilities
    c.add("ok", f"{where}: {can.product} {info.get('ServerVersion')} (cgroup "
                f"{info.get('CgroupVersion')}, runtime {info.get('DefaultRuntime')})")
    probed = _probe(c, engine, matrix, where) if wants_gpu and matrix is not None else None
    if probed is not None:  # the engine's own GPUs, not this machine's
        host, has_gpu, local_gpus = probed, True, True
    else:
        local_gpus = local
    # GPUs by CDI name (podman): the setup checks above looked for the spec.
    cdi = can.gpu_by == "cdi"
    mechanisms = [] if cdi else gpu.engine_gpu_mechanisms(info, hook_found and local)
    if probed is not None and not mechanisms:
        mechanisms = [("CDI" if cdi else "--gpus") + " (a probe container was given GPUs)"]
    if mechanisms:
        c.add("ok", f"{where}: GPU support: {', '.join(mechanisms)}")
    elif cdi:
        pass
    elif wants_gpu and local:
        c.add("FAIL", f"{where}: no NVIDIA runtime, CDI devices or --gpus hook", TOOLKIT_FIX)
    elif wants_gpu:
        c.add("warn", f"{where}: no nvidia runtime or CDI devices listed by the remote "
                      "engine; `--gpus` support cannot be seen from here",
              f"if cells fail to start, on that host: {TOOLKIT_FIX}")
    if wants_gpu and local and not has_gpu and probed is None:
        c.add("FAIL", f"{where}: the matrix asks for GPUs but this host has none",
              "run on a GPU host or set gpu: [none]")
    if matrix is None:
        return
    gpus = host.gpus if local_gpus else []
    if local_gpus and host.gpus:
        for sel in matrix.gpus:
            if sel.wants_gpu and gpu.select(sel.value, host.gpus) is None:
                c.add("FAIL", f"{where}: the matrix selects GPU {sel.value}, which this host "
                              f"does not have (GPUs: {', '.join(str(g.index) for g in gpus)})",
                      "fix `gpu:` in the matrix")
    elif wants_gpu and not local_gpus:
        c.add("warn", f"{where}: the remote host's GPUs are not visible from here; image/GPU "
                      "compatibility is decided when its cells run")
    for img in matrix.images:
        config = engine.image_config(img.ref)
        if config is None:
            # The sweep pulls a missing image: only one no registry gives stops it.
            why = engine.pullable(img.ref)
            if why is None:
                c.add("ok", f"{where}: image {img.ref}: not on the engine yet, its registry "
                            "has it (the sweep pulls it)")
                continue
            first, *rest = why.splitlines()
            fix = rest[-1].strip().removeprefix("fix: ") if rest else ""
            # Said once: the pull's reason may already say the image is not here.
            said = first.removeprefix(f"image {img.ref}").lstrip(": ")
            if not said.startswith("is not on the engine"):
                said = f"is not on the engine and {said}"
            c.add("FAIL", f"{where}: image {img.ref} {said}",
                  fix or f"docker pull {img.ref} on a host with registry access")
            continue
        cuda = gpu.image_cuda(config.get("labels"), config.get("env"))
        c.add("ok", f"{where}: image {img.ref}" + (
            f" (CUDA {cuda[0]}.{cuda[1]})" if cuda else ""))
        targets = {g.index: g for sel in matrix.gpus if sel.wants_gpu
                   for g in gpu.select(sel.value, gpus) or []}
        for g in targets.values():
            found = gpu.precheck(cuda, g, host.cuda_driver)
            if found is not None:
                c.add("warn", f"{where}: {img.label} on GPU {g.index} ({g.name}): "
                              f"{found[0]}: {found[1]}")
