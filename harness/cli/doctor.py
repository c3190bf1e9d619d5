"""`harness doctor [matrix.yaml]`: can this host run the sweep? What to fix."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness import gpu
from harness.errors import EXIT_ENVIRONMENT, EXIT_OK, HarnessError


def add_parser(sub: Any) -> None:
    p = sub.add_parser("doctor", help="check engine, GPUs and images")
    p.add_argument("matrix", type=Path, nargs="?", help="also check this matrix's images")
    p.add_argument("--docker-host")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from harness import spec

    problems = 0

    def line(ok: bool, what: str, fix: str = "") -> None:
        nonlocal problems
        problems += 0 if ok else 1
        print(f"[{'ok' if ok else 'FAIL'}] {what}" + (f"\n       fix: {fix}" if fix else ""))

    matrix = spec.load(args.matrix) if args.matrix else None
    has_gpu = gpu.host_has_gpu()
    line(True, f"NVIDIA driver: {'present' if has_gpu else 'absent (CPU-only host)'}")
    gpus = gpu.list_gpus()
    for g in gpus:
        line(True, f"GPU {g.index}: {g.name} cc {g.cc} {g.uuid}")
    if matrix is None or matrix.runtime == "docker":
        from harness.runtimes.docker import DockerRuntime

        rt = DockerRuntime(args.docker_host)
        try:
            info = rt.client.info()
            line(True, f"Docker engine {info.get('ServerVersion')} "
                       f"(cgroup {info.get('CgroupVersion')})")
            support = gpu.engine_gpu_support(info)
            line(support is not None or not has_gpu,
                 f"GPU support in engine: {support or 'none'}",
                 "" if support or not has_gpu else "install nvidia-container-toolkit")
            if matrix is not None:
                for img in matrix.images:
                    present = rt.image_labels(img.ref) is not None
                    line(present, f"image {img.ref}",
                         "" if present else f"docker pull {img.ref}, or harness images build")
        except HarnessError as exc:
            line(False, str(exc).splitlines()[0], str(exc).splitlines()[-1].strip())
    if matrix is not None and any(g.wants_gpu for g in matrix.gpus) and not has_gpu:
        line(False, "the matrix asks for GPUs but this host has none",
             "run on a GPU host or set gpu: [none]")
    return EXIT_ENVIRONMENT if problems else EXIT_OK
