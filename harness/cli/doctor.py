"""`harness doctor [matrix.yaml]`: can this host run the sweep? What to fix.

Checks the NVIDIA driver and GPUs, each engine of the matrix and its GPU mechanism,
each image's presence and CUDA version, and whether each image can run on each GPU (the
sweep's precheck). Exits 3 when the sweep would be unusable; warnings do not.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import gpu, matrixfile
from harness.cli import options
from harness.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EXIT_OK, InputError
from harness.matrixfile.load import check_applied
from harness.matrixfile.model import DEFAULT_RUNTIME, Matrix, abilities
from harness.preflight import compile_scenarios
from harness.runtimes.dockerdoctor import Engine, docker_engine, engine_checks
from harness.runtimes.local import local_checks
from harness.runtimes.slurm import cluster_checks


@dataclass
class Checks:
    lines: list[str] = field(default_factory=list)
    failures: int = 0
    bad_input: int = 0      # failures of the matrix or its scenarios: exit 2, as the sweep's

    def add(self, level: str, what: str, fix: str = "", bad_input: bool = False) -> None:
        self.failures += level == "FAIL"
        self.bad_input += level == "FAIL" and bad_input
        self.lines.append(f"[{level}] {what}" + (f"\n       fix: {fix}" if fix else ""))

    def shown(self, quiet: bool) -> str:
        """The checks as printed: all, or with -q only those that fail or warn."""
        return "\n".join(line for line in self.lines
                         if not quiet or not line.startswith("[ok]"))

    @property
    def code(self) -> int:
        """2 for a bad matrix or scenario (as the sweep), else 3 for an environment
        failure, else 0."""
        return (EXIT_BAD_INPUT if self.bad_input else EXIT_ENVIRONMENT if self.failures
                else EXIT_OK)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("doctor", help="check engine, GPU runtime, driver, GPUs and images")
    p.add_argument("matrix", type=Path, nargs="?", help="also check this matrix's images")
    options.add(p, "docker-host", "out", out_keeps="slurm: must be shared with the nodes",
                docker_host_does="check this engine instead of the matrix's hosts")
    options.add(p, "quiet", quiet_does="print only the checks that fail or warn")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    options.check(args)
    matrix = matrixfile.load(args.matrix) if args.matrix else None
    if matrix is not None and matrix.slurm is not None:
        # The cells run on the cluster's nodes: check the cluster, not this host.
        slurm = Checks()
        for level, what, fix in cluster_checks(matrix, args.out):
            slurm.add(level, what, fix)
        print(slurm.shown(args.quiet))
        return slurm.code
    if args.docker_host:
        endpoints: dict[str, str | None] = {args.docker_host: args.docker_host}
    elif matrix is not None:
        endpoints = {h.label: h.url for h in matrix.hosts}
    else:
        endpoints = {"local": None}
    name = matrix.runtime if matrix is not None else DEFAULT_RUNTIME
    checks = diagnose(matrix, endpoints, lambda url: docker_engine(url, name), gpu.probe(),
                      gpu.host_has_gpu(),
                      shutil.which("nvidia-container-runtime-hook") is not None, args.out)
    print(checks.shown(args.quiet))
    return checks.code


def diagnose(matrix: Matrix | None, endpoints: Mapping[str, str | None],
             connect: Callable[[str | None], Engine], host: gpu.HostGpus, has_gpu: bool,
             hook_found: bool, out: Path = Path("reports")) -> Checks:
    """Every check, as lines to print; `failures` counts what makes the sweep unusable.

    Args:
        out: The results base directory (a local matrix: checked writable)."""
    c = Checks()
    wants_gpu = matrix is not None and any(g.wants_gpu for g in matrix.gpus)
    if not has_gpu:
        c.add("ok" if not wants_gpu else "warn", "NVIDIA driver: absent (CPU-only host)")
    elif host.driver is None:
        c.add("warn", f"NVIDIA driver present; GPU details unavailable: {host.reason}",
              "pip install 'harness[gpu]' (nvidia-ml-py) for names, compute capability "
              "and host-side GPU memory sampling")
    else:
        cuda = f", CUDA {host.cuda_driver[0]}.{host.cuda_driver[1]}" if host.cuda_driver else ""
        c.add("ok", f"NVIDIA driver {host.driver}{cuda}, {len(host.gpus)} GPU(s)")
    for g in host.gpus:
        cc = f"{g.cc[0]}.{g.cc[1]}" if g.cc else "?"
        mem = f", {g.memory_total // 2**20} MiB" if g.memory_total else ""
        c.add("ok", f"GPU {g.index}: {g.name}, compute capability {cc}{mem}, {g.uuid}")
    if matrix is not None and not abilities(matrix.runtime).container_images:
        if wants_gpu and not has_gpu:
            c.add("FAIL", "the matrix asks for GPUs but this host has none",
                  "run on a GPU host or set gpu: [none]")
        for level, what, fix in local_checks(matrix, out):
            c.add(level, what, fix)
        _scenario_check(c, matrix)
        return c
    for label, url in endpoints.items():
        for level, what, fix in engine_checks(matrix, label, url, connect, host, has_gpu,
                                              hook_found, wants_gpu):
            c.add(level, what, fix)
    if matrix is not None:
        _scenario_check(c, matrix)
    return c


def _scenario_check(c: Checks, matrix: Matrix) -> None:
    """Every setting applies on the matrix's runtime and every scenario compiles, as
    the sweep checks."""
    try:
        check_applied(matrix, matrix.runtime)
    except InputError as exc:
        head, _, fix = str(exc).partition("\n  fix: ")
        c.add("FAIL", head, fix, bad_input=True)
    try:
        compile_scenarios(matrix.cells)
    except InputError as exc:
        lines = str(exc).splitlines()
        fixes = [ln.strip().removeprefix("fix: ") for ln in lines if ln.strip().startswith(
            "fix:")]
        said = [ln.strip() for ln in lines[1:] if not ln.strip().startswith("fix:")]
        c.add("FAIL", f"scenario {lines[0]}" + (f": {' '.join(said)}" if said else ""),
              fixes[0] if fixes else "correct the scenario", bad_input=True)
        return
    c.add("ok", f"scenarios compile ({len({x.scenario.script for x in matrix.cells})})")
