"""`harness doctor` for a matrix with `slurm:`: can this cluster run its cells?

sinfo answers; the partition exists and has nodes up; the GPU gres the cells ask for
is there; Slurm would accept each kind of job (`sbatch --test-only`); accounting keeps
end states (else `scontrol` must see them before MinJobAge); and a job can write to
the results directory (a file system shared with the nodes).
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.errors import EnvironmentUnavailable
from harness.matrixfile.model import Matrix
from harness.runtimes.base import Check
from harness.runtimes.slurm import SlurmRuntime
from harness.runtimes.slurmqueue import NO_SLURM_FIX, slurm_cli

PROBE_TIMEOUT_S = 180.0


def cluster_checks(matrix: Matrix, results_base: Path) -> list[Check]:
    spec = matrix.slurm
    assert spec is not None
    out: list[Check] = []
    try:
        rc, text = slurm_cli(["sinfo", "-h", "-o", "%P|%a|%D|%t|%G"])
    except EnvironmentUnavailable as exc:
        return [("FAIL", str(exc).splitlines()[0], NO_SLURM_FIX)]
    if rc != 0:
        return [("FAIL", f"Slurm does not answer: {text.strip()[:300]}", NO_SLURM_FIX)]
    rows = [ln.split("|") for ln in text.splitlines() if ln.count("|") == 4]
    default = next((r[0].rstrip("*") for r in rows if r[0].endswith("*")), None)
    name = spec.partition or default
    mine = [r for r in rows if r[0].rstrip("*") == name]
    if not mine:
        names = sorted({r[0].rstrip("*") for r in rows})
        return [("FAIL", f"Slurm: no partition {name!r} (partitions: "
                         f"{', '.join(names) or 'none'})", "set slurm.partition to one of them")]
    up = sum(int(r[2]) for r in mine if r[3].rstrip("*~#!%$@^-") in ("idle", "mix", "alloc"))
    avail = mine[0][1]
    level = "ok" if avail == "up" and up else "FAIL"
    out.append((level, f"Slurm: partition {name} is {avail}, {up} node(s) up "
                       f"({', '.join(f'{r[2]} {r[3]}' for r in mine)})",
                "" if level == "ok" else "ask the cluster's admins, or use another partition"))
    gres = sorted({g for r in mine for g in r[4].split(",") if g.startswith("gpu")})
    wants = any(c.gpu.wants_gpu for c in matrix.cells)
    if wants:
        typed = [g for g in gres if spec.gpu_type is None or
                 re.match(rf"gpu:{re.escape(spec.gpu_type)}:", g)]
        if typed:
            out.append(("ok", f"Slurm: GPU gres in {name}: {', '.join(gres)}", ""))
        else:
            out.append(("FAIL", f"Slurm: partition {name} has no GPU gres"
                                + (f" of type {spec.gpu_type}" if spec.gpu_type else "")
                                + f" (gres: {', '.join(gres) or 'none'})",
                        "fix slurm.gpu_type or slurm.partition, or set gpu: [none]"))
    runtime = SlurmRuntime(matrix.runtime, spec, matrix.name)
    try:
        runtime.check(list(matrix.cells))
        out.append(("ok", f"Slurm: would accept the jobs of all {len(matrix.cells)} cells "
                          "(sbatch --test-only)", ""))
    except EnvironmentUnavailable as exc:
        first, *rest = str(exc).splitlines()
        out.append(("FAIL", first, rest[-1].strip().removeprefix("fix: ") if rest else ""))
    rc, text = slurm_cli(["scontrol", "show", "config"])
    storage = re.search(r"^AccountingStorageType\s*=\s*(\S+)", text, re.M)
    if storage and storage.group(1) != "accounting_storage/none":
        out.append(("ok", f"Slurm: accounting ({storage.group(1)}): sacct keeps end states", ""))
    else:
        found = re.search(r"^MinJobAge\s*=\s*(\S+)", text, re.M)
        age = found.group(1) if found else "?"
        out.append(("warn", "Slurm: no accounting; end states come from scontrol while the "
                            f"controller keeps finished jobs (MinJobAge {age})",
                    "keep harness running until its jobs end"))
    try:
        results_base.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        out.append(("FAIL", f"Slurm: cannot create the results directory {results_base}: "
                            f"{exc.strerror}", "name a writable, shared directory with --out"))
        return out
    try:
        runtime.probe(results_base.absolute(), lambda _text: None, timeout_s=PROBE_TIMEOUT_S)
        out.append(("ok", f"Slurm: a job wrote to {results_base.absolute()} (shared with "
                          "the nodes, harness runs there)", ""))
    except EnvironmentUnavailable as exc:
        first, *rest = str(exc).splitlines()
        out.append(("FAIL", f"Slurm: {first}",
                    rest[-1].strip().removeprefix("fix: ") if rest else ""))
    return out
