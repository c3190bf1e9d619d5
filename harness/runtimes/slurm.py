"""Cells as Slurm jobs: the cluster's scheduler decides where and when each cell runs.

`slurm:` in the matrix wraps the matrix's runtime (docker or local): every cell is
one `sbatch` job asking for the cell's GPUs (`--gres=gpu[:TYPE]:N`) and memory, and
inside the job `harness _cell` runs it as that runtime would here (see slurmjob.py).
The orchestrator submits every cell at once (`queues_cells`); one poller thread asks
`squeue` about all of the sweep's jobs every few seconds, and a job's end state
(from accounting when the cluster keeps it, else `scontrol` while the job is kept)
maps to an outcome:

    COMPLETED / FAILED   what `_cell` wrote to outcome.json (else a crash, with the log)
    TIMEOUT              timeout (the job's time limit)
    OUT_OF_MEMORY        oom (exit 137)
    NODE_FAIL, PREEMPTED an engine-lost error: the orchestrator runs it once more,
    BOOT_FAIL            then records a crash
    CANCELLED            interrupted: the sweep stops (exit 130) and --resume reruns it

Results come back through the results directory, which must be on a file system the
nodes mount at the same path; the first cell checks that with a small probe job
before any cell is submitted. Ctrl-C cancels every job of the sweep.
"""

from __future__ import annotations

import json
import math
import shlex
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import EnvironmentUnavailable
from harness.matrixfile.model import Cell, ImageSpec, SlurmSpec, abilities
from harness.runtimes.base import (
    ImageInfo,
    Progress,
    RunOutcome,
    RunRequest,
    RuntimeBase,
    parse_size,
)
from harness.runtimes.slurmjob import ENDED, OUTCOME, STARTED, outcome_from_json, write_spec
from harness.runtimes.slurmqueue import NO_SLURM_FIX, JobEnd, JobWatcher, slurm_cli

if TYPE_CHECKING:
    from harness.runtimes.local import LocalRuntime

HEADROOM = 256 * 2**20     # the `_cell` process beside the cell, in the job's memory
TIME_MARGIN_S = 120.0      # our own deadline fires first; Slurm's limit is the backstop
HARNESS_ROOT = Path(__file__).resolve().parent.parent.parent
LOST = ("NODE_FAIL", "PREEMPTED", "BOOT_FAIL")
CANCEL_GRACE_S = 30.0      # for `_cell` to stop its container after scancel


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


class SlurmRuntime(RuntimeBase):
    """Hands each cell to Slurm; `inner` (docker, podman or local) runs it inside the job."""

    queues_cells = True   # the orchestrator submits every cell at once

    def __init__(self, inner: str, spec: SlurmSpec, sweep_name: str = "sweep",
                 docker_host: str | None = None):
        self.inner = inner
        self.spec = spec
        self.sweep_name = sweep_name
        self.docker_host = docker_host
        self.name = f"slurm/{inner}"
        self._jobs: set[str] = set()
        self._lock = threading.RLock()  # _probe submits while holding it
        self._probed: Path | None = None
        self._probe_error: EnvironmentUnavailable | None = None
        self._watcher: JobWatcher | None = None
        self._builder: LocalRuntime | None = None   # builds venvs for runtime: local

    def check(self, cells: list[Cell]) -> None:
        """sinfo answers, and Slurm would accept each kind of job the cells make
        (`sbatch --test-only`: the partition, account, GPU type and count, memory)."""
        rc, out = slurm_cli(["sinfo", "-h", "-o", "%P"])
        if rc != 0:
            raise EnvironmentUnavailable(f"Slurm does not answer: `sinfo` says "
                                         f"{out.strip()[:300]}\n  fix: {NO_SLURM_FIX}")
        kinds: dict[tuple[str, ...], list[str]] = {}
        for c in cells:
            args = sbatch_args(c, self.spec, Path("-"), Path("/dev/null"), "harness-check")
            kinds.setdefault(tuple(a for a in args[1:-1] if not a.startswith(
                ("--job-name", "--output", "--parsable"))), []).append(c.id)
        for opts, ids in kinds.items():
            rc, out = slurm_cli(["sbatch", "--test-only", *opts, "--wrap=true"])
            if rc != 0:
                why = [ln for ln in out.splitlines() if ln.strip()][-1:] or [out]
                raise EnvironmentUnavailable(
                    f"Slurm would refuse the job of {', '.join(ids[:3])}"
                    f"{' and others' if len(ids) > 3 else ''}: {why[0].strip()}\n"
                    f"  options: {' '.join(opts)}\n  fix: match slurm: (partition, account, "
                    "gpu_type, mem, options) and the cells' gpu:/mem_limit to the cluster: "
                    "`sinfo -o '%P %G %m'` lists partitions, GPUs and memory")

    def prepare(self, image: ImageSpec, progress: Progress) -> ImageInfo:
        """local: the venv is built here, into a cache the nodes must see
        (HARNESS_CACHE on the shared file system); a container runtime (docker,
        podman): the node's engine pulls the image inside the job, so nothing happens
        here."""
        if not abilities(self.inner).container_images:
            return self._local().prepare(image, progress)
        return ImageInfo(ref=image.ref, python=image.python or "python3")

    def _local(self) -> LocalRuntime:
        with self._lock:
            if self._builder is None:
                from harness.runtimes.local import LocalRuntime

                self._builder = LocalRuntime()
            return self._builder

    def abort_prepare(self) -> None:
        """Ctrl-C: kill a venv build in progress (see LocalRuntime.abort_prepare)."""
        if self._builder is not None:
            self._builder.abort_prepare()

    def probe(self, root: Path, progress: Progress, cancelled: Callable[[], bool] = bool,
              timeout_s: float | None = None) -> None:
        """Once per results directory: a tiny job writes a file there with this
        harness's interpreter and code; the file must appear here.

        Raises:
            EnvironmentUnavailable: the file did not appear (not a shared file system,
                harness or its Python missing on the node), or the job did not end
                within `timeout_s`.
        """
        with self._lock:
            if self._probe_error is not None:
                raise self._probe_error
            if self._probed == root:
                return
            if cancelled():
                raise KeyboardInterrupt
            mark = root / ".slurm-probe"
            mark.unlink(missing_ok=True)
            script = root / ".slurm-probe.sh"
            script.write_text(job_script([sys.executable, "-c",
                                          "import harness,os,sys;open(sys.argv[1],'w')"
                                          ".write(os.environ.get('SLURM_JOB_ID',''))",
                                          str(mark)]), encoding="utf-8")
            log = root / ".slurm-probe.log"
            argv = ["sbatch", "--parsable", f"--job-name=harness-probe-{self.sweep_name}",
                    f"--output={log}", "--time=2", "--mem=200M", "--nodes=1", "--ntasks=1",
                    "--no-requeue",
                    *self._placement(), *self.spec.options, str(script)]
            progress(f"Slurm: checking that jobs can write to {root}")
            for _ in range(2):  # a lost node: once more, as for cells
                job_id = self._submit(argv)
                end = self._wait(job_id, "results directory check", cancelled, progress,
                                 timeout_s)
                if end.state not in LOST:
                    break
            seen = mark.read_text(encoding="utf-8") if mark.exists() else None
            if seen != job_id:
                from harness.runtimes.local import _tail

                self._probe_error = EnvironmentUnavailable(
                    f"a Slurm job could not write to the results directory {root} "
                    f"(job {job_id} {end.state} {end.exit_code}:{end.signal}: "
                    f"{_tail(log, 400).strip()})\n  fix: put the results on a file system "
                    "every node mounts at the same path (--out /shared/...), with harness "
                    "and its Python installed at the same path too")
                raise self._probe_error
            for p in (mark, script, log):
                p.unlink(missing_ok=True)
            self._probed = root

    def _placement(self) -> list[str]:
        return ([f"--partition={self.spec.partition}"] if self.spec.partition else []) + \
            ([f"--account={self.spec.account}"] if self.spec.account else [])

    def _submit(self, argv: list[str]) -> str:
        """sbatch; the job id.

        Raises:
            EnvironmentUnavailable: Slurm refused the job (no such GPU type, account,
                too much memory for any node).
        """
        rc, out = slurm_cli(argv)
        job_id = out.strip().splitlines()[-1].split(";")[0] if out.strip() else ""
        if rc != 0 or not job_id.isdigit():
            raise EnvironmentUnavailable(f"Slurm refused the job: {out.strip()[-400:]}\n"
                                         f"  command: {shlex.join(argv)}\n  fix: check "
                                         "slurm: in the matrix against `sinfo -o '%P %G %m'`")
        with self._lock:
            self._jobs.add(job_id)
        return job_id

    def run(self, request: RunRequest, progress: Progress) -> RunOutcome:
        outdir = request.outdir
        self.probe(outdir.parent.parent, progress, request.cancelled)
        if request.cancelled():
            raise KeyboardInterrupt
        cell = request.cell
        spec_path, script, log = outdir / "slurm-cell.json", outdir / "slurm-job.sh", \
            outdir / "slurm.log"
        inner = "pyxis" if self.spec.pyxis else self.inner
        write_spec(spec_path, request, inner, self.docker_host)
        script.write_text(job_script([sys.executable, "-m", "harness", "_cell",
                                      str(spec_path)]), encoding="utf-8")
        argv = sbatch_args(cell, self.spec, script, log,
                           f"harness-{self.sweep_name}-{cell.id}")
        job_id = self._submit(argv)
        start = time.monotonic()
        end = self._wait(job_id, cell.id, request.cancelled, progress, outdir=outdir)
        return self._outcome(end, request, log, time.monotonic() - start, argv)

    def _wait(self, job_id: str, cell_id: str, cancelled: Callable[[], bool],
              progress: Progress, timeout_s: float | None = None,
              outdir: Path | None = None) -> JobEnd:
        """The job's end; KeyboardInterrupt once it ended cancelled (ours or scancel's).

        Raises:
            EnvironmentUnavailable: it did not end within `timeout_s` (then cancelled).
        """
        try:
            return self._wait_watched(job_id, cell_id, cancelled, progress, timeout_s)
        except KeyboardInterrupt:
            if outdir is not None and (outdir / STARTED).exists():
                # Slurm says CANCELLED before `_cell` has stopped its container.
                until = time.monotonic() + CANCEL_GRACE_S
                while not (outdir / ENDED).exists() and time.monotonic() < until:
                    time.sleep(0.2)
            raise
        finally:
            with self._lock:
                self._jobs.discard(job_id)

    def _wait_watched(self, job_id: str, cell_id: str, cancelled: Callable[[], bool],
                      progress: Progress, timeout_s: float | None) -> JobEnd:
        with self._lock:
            if self._watcher is None:
                self._watcher = JobWatcher(progress)
            watcher = self._watcher
        watcher.watch(job_id, cell_id)
        cancelled_at: float | None = None
        start = time.monotonic()
        while True:
            end = watcher.wait(job_id, 0.5)
            if end is not None:
                break
            if timeout_s is not None and time.monotonic() - start > timeout_s:
                slurm_cli(["scancel", job_id])
                raise EnvironmentUnavailable(
                    f"{cell_id}: Slurm job {job_id} did not end within {timeout_s:.0f}s "
                    "(cancelled); the partition may be busy\n  fix: try again later, or "
                    "name a partition with free nodes in slurm.partition")
            if cancelled() and cancelled_at is None:
                cancelled_at = time.monotonic()
                slurm_cli(["scancel", job_id])
            if cancelled_at is not None and time.monotonic() - cancelled_at > 60:
                raise KeyboardInterrupt  # scancel sent; the controller is slow to confirm
        if end.state == "CANCELLED" or cancelled_at is not None:
            if cancelled_at is None:
                progress(f"{cell_id}: Slurm job {job_id} was cancelled (scancel); "
                         "stopping the sweep")
            raise KeyboardInterrupt
        return end

    def _outcome(self, end: JobEnd, request: RunRequest, log: Path, waited_s: float,
                 argv: list[str]) -> RunOutcome:
        path = request.outdir / OUTCOME
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        outcome = (outcome_from_json(data) if isinstance(data, dict)
                   else RunOutcome(exit_code=end.exit_code))
        from harness.runtimes.local import _tail

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
            mem = job_mem(request.cell, self.spec)
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

    def cleanup(self) -> int:
        """Cancel the jobs this sweep submitted that are still queued or running."""
        with self._lock:
            jobs = sorted(self._jobs)
        if jobs:
            slurm_cli(["scancel", *jobs])
        return len(jobs)
