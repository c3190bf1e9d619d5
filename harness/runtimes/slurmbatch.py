"""What a cell's Slurm job is: its sbatch line and batch script, and what its end means.

Pure functions of the cell, the matrix's `slurm:` block and the job's end record; the
runtime (slurm.py) submits and waits (slurmqueue.py), the job runs `_cell` (slurmjob.py).
"""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

from harness.matrixfile.model import Cell, SlurmSpec
from harness.runtimes.base import RunOutcome, RunRequest, parse_size
from harness.runtimes.local import _tail
from harness.runtimes.slurmjob import OUTCOME, outcome_from_json
from harness.runtimes.slurmqueue import JobEnd

HEADROOM = 256 * 2**20     # the `_cell` process beside the cell, in the job's memory
TIME_MARGIN_S = 120.0      # our own deadline fires first; Slurm's limit is the backstop
HARNESS_ROOT = Path(__file__).resolve().parent.parent.parent
LOST = ("NODE_FAIL", "PREEMPTED", "BOOT_FAIL")


def gres(cell: Cell, spec: SlurmSpec) -> str | None:
    """`gpu[:TYPE]:N` for the cell's GPUs: an index or UUID is one GPU (Slurm picks
    which), `all` is slurm.gpus_per_node, `none` asks for none."""
    if not cell.gpu.wants_gpu:
        return None
    n = spec.gpus_per_node if cell.gpu.value == "all" else 1
    return f"gpu:{spec.gpu_type}:{n}" if spec.gpu_type else f"gpu:{n}"


def job_minutes(cell: Cell, spec: SlurmSpec) -> int:
    seconds = spec.time if spec.time is not None else cell.settings.timeout + TIME_MARGIN_S
    return max(1, math.ceil(seconds / 60))


def job_mem(cell: Cell, spec: SlurmSpec) -> str | None:
    """slurm.mem, else the cell's mem_limit plus room for `_cell` (MiB), else none."""
    if spec.mem is not None:
        return spec.mem
    limit = parse_size(cell.settings.mem_limit)
    return None if limit is None else f"{math.ceil((limit + HEADROOM) / 2**20)}M"


def sbatch_args(cell: Cell, spec: SlurmSpec, script: Path, log: Path, name: str) -> list[str]:
    """The sbatch command line for one cell (argument list, no shell)."""
    args = ["sbatch", "--parsable", f"--job-name={name}", f"--output={log}",
            "--no-requeue", "--nodes=1", "--ntasks=1", f"--time={job_minutes(cell, spec)}"]
    if spec.partition:
        args.append(f"--partition={spec.partition}")
    if spec.account:
        args.append(f"--account={spec.account}")
    g = gres(cell, spec)
    if g:
        args.append(f"--gres={g}")
    mem = job_mem(cell, spec)
    if mem:
        args.append(f"--mem={mem}")
    return [*args, *spec.options, str(script)]


def job_script(command: list[str]) -> str:
    """The batch script: this harness's interpreter and code (the same paths must
    exist on the nodes: a shared file system, or the same install everywhere)."""
    return ("#!/bin/sh\n# Written by harness: one cell of a sweep, run by Slurm.\n"
            f"export PYTHONPATH={shlex.quote(str(HARNESS_ROOT))}${{PYTHONPATH:+:$PYTHONPATH}}\n"
            f"exec {' '.join(shlex.quote(a) for a in command)}\n")


def outcome_of(end: JobEnd, request: RunRequest, spec: SlurmSpec, log: Path, waited_s: float,
               argv: list[str]) -> RunOutcome:
    """The cell's outcome from what `_cell` wrote (outcome.json) and the job's end
    state: TIMEOUT a timeout, OUT_OF_MEMORY an OOM kill, a lost node an engine error
    (run once more), a job that died before `_cell` wrote anything a crash with its log."""
    path = request.outdir / OUTCOME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = None
    outcome = (outcome_from_json(data) if isinstance(data, dict)
               else RunOutcome(exit_code=end.exit_code))

    slurm_log = _tail(log, 4000)
    if not isinstance(data, dict):
        outcome.log_tail = slurm_log
        outcome.duration_s = end.elapsed_s or 0.0
    outcome.details["slurm"] = {"job": end.job_id, "state": end.state,
                                "exit_code": end.exit_code, "signal": end.signal,
                                "elapsed_s": end.elapsed_s, "node": end.node,
                                "waited_s": round(waited_s, 3), "sbatch": argv}
    if end.state == "TIMEOUT":
        outcome.timed_out = True
        outcome.exit_code = None
        outcome.duration_s = end.elapsed_s or outcome.duration_s
    elif end.state == "OUT_OF_MEMORY":
        outcome.exit_code, outcome.oom_killed = 137, True
        mem = job_mem(request.cell, spec)
        outcome.mem_limit_bytes = outcome.mem_limit_bytes or (
            parse_size(mem.lower()) if mem else None)
    elif end.state in LOST or end.state == "UNKNOWN":
        outcome.error = (f"Slurm job {end.job_id} ended {end.state}"
                         + (f" on {end.node}" if end.node else ""))
    elif not isinstance(data, dict):
        outcome.exit_code = end.exit_code if end.exit_code else 1
        outcome.log_tail = f"Slurm job {end.job_id} {end.state} " \
                           f"{end.exit_code}:{end.signal}\n{slurm_log}"
    return outcome
