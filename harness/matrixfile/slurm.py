"""The matrix's `slurm:` block -> `SlurmSpec`, validated like every other key."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from harness.matrixfile.model import RUNTIMES, GpuSel, Host, SlurmSpec, abilities

if TYPE_CHECKING:
    from harness.matrixfile.entries import Ctx

KEYS = ("partition", "account", "time", "gpu_type", "gpus_per_node", "mem", "options",
        "pyxis")
ALLOWED = KEYS + tuple(k.replace("_", "-") for k in KEYS if "_" in k)
# What harness itself sets for every job: a matrix naming them would fight it.
OWN_OPTIONS = ("--gres", "--gpus", "--mem", "--time", "-t", "--output", "-o", "--error",
               "-e", "--job-name", "-J", "--wait", "-W", "--parsable", "--partition", "-p",
               "--account", "-A", "--wrap", "--requeue", "--no-requeue", "--array", "-a")
_NAME = re.compile(r"^[A-Za-z0-9_.+-]+$")
_SIZE = re.compile(r"^\d+[kmgtKMGT]?$")


def parse_slurm(ctx: Ctx, value: Any, runtime: str, gpus: tuple[GpuSel, ...],
                hosts: tuple[Host, ...]) -> SlurmSpec | None:
    """Validate `slurm:` (None when absent).

    Raises:
        SpecError: an unknown key, a bad value, an sbatch option harness sets itself,
            or `slurm:` together with `hosts:`.
    """
    if value is None:
        return None
    raw = ctx.mapping({} if value is True else value, ("slurm",), ALLOWED)
    if len(hosts) > 1 or hosts[0].url is not None:
        raise ctx.fail(("slurm",), "`slurm:` and `hosts:` both say where cells run",
                       "drop `hosts:`: Slurm picks the nodes")
    got: dict[str, Any] = {}
    for key, v in raw.items():
        field, here = key.replace("-", "_"), ("slurm", key)
        if field in ("partition", "account", "gpu_type"):
            if not isinstance(v, str) or not _NAME.match(v):
                raise ctx.fail(here, f"must be a Slurm name (letters, digits, '_.+-'), "
                               f"got {v!r}", f"e.g. {key}: " + {"partition": "gpu",
                               "account": "mylab", "gpu_type": "a100"}[field])
            got[field] = v
        elif field == "time":
            got[field] = ctx.duration(v, here, "write e.g. 30m, 2h or 90s")
        elif field == "gpus_per_node":
            if type(v) is not int or v < 1:
                raise ctx.fail(here, f"must be an integer >= 1, got {v!r}")
            got[field] = v
        elif field == "mem":
            if not (type(v) is int and v > 0) and not (isinstance(v, str) and _SIZE.match(v)):
                raise ctx.fail(here, f"bad size {v!r}", "write e.g. 8g or 16000m")
            got[field] = str(v)
        elif field == "pyxis":
            if not isinstance(v, bool):
                raise ctx.fail(here, f"must be true or false, got {v!r}")
            if v and not abilities(runtime).container_images:
                runs = " or ".join(f"`runtime: {n}`" for n in RUNTIMES
                                   if abilities(n).container_images)
                raise ctx.fail(here, "pyxis runs container images", f"use {runs}")
            got[field] = v
        elif field == "options":
            got[field] = _options(ctx, v, here)
    if (any(g.value == "all" for g in gpus) and "gpus_per_node" not in got):
        raise ctx.fail(("slurm",), "`gpu: all` needs to know how many GPUs a job asks for",
                       "add slurm.gpus_per_node: N (the GPUs of one node)")
    return SlurmSpec(**got)


def _options(ctx: Ctx, value: Any, path: tuple[str, ...]) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(o, str) and o for o in items):
        raise ctx.fail(path, "options must be a list of sbatch options",
                       "e.g. options: [--qos=high, --constraint=a100]")
    for i, opt in enumerate(items):
        name = opt.split("=", 1)[0]
        if not opt.startswith("-") or " " in name:
            raise ctx.fail((*path, i), f"{opt!r} is not an sbatch option",
                           "one option per entry, written --name=value")
        if name in OWN_OPTIONS:
            own = {"--partition": "partition", "-p": "partition", "--account": "account",
                   "-A": "account", "--time": "time", "-t": "time", "--mem": "mem",
                   "--gres": "gpu_type (and the matrix's gpu:)",
                   "--gpus": "gpu_type (and the matrix's gpu:)"}.get(name)
            raise ctx.fail((*path, i), f"harness sets {name} itself",
                           f"use slurm.{own}" if own else "drop it")
    return tuple(items)
