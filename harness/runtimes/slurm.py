"""Cells as Slurm jobs: the cluster's scheduler decides where and when each cell runs.
`slurm:` wraps the matrix's runtime: every cell is one `sbatch` job asking for its GPUs
and memory, run inside the job by `harness _cell` (slurmjob.py); one poller asks `squeue`
about all the sweep's jobs, and a job's end state maps to an outcome. Results come back
through the results directory, on a file system the nodes mount at the same path, which
a small probe job checks before any cell is submitted."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from harness.errors import EnvironmentUnavailable
from harness.matrixfile.model import Cell, ImageSpec, SlurmSpec, abilities
from harness.runtimes.base import ImageInfo, Progress, RunOutcome, RunRequest, RuntimeBase
from harness.runtimes.local import LocalRuntime, _tail
from harness.runtimes.slurmbatch import LOST, job_script, outcome_of, sbatch_args
from harness.runtimes.slurmjob import write_spec
from harness.runtimes.slurmqueue import NO_SLURM_FIX, JobQueue, slurm_cli


class SlurmRuntime(RuntimeBase):
    """Hands each cell to Slurm; `inner` (docker, podman or local) runs it inside the job."""

    queues_cells = True   # the orchestrator submits every cell at once
    product = "Slurm"

    def __init__(self, inner: str, spec: SlurmSpec, sweep_name: str = "sweep",
                 docker_host: str | None = None):
        self.inner = inner
        self.spec = spec
        self.sweep_name = sweep_name
        self.docker_host = docker_host
        self.name = f"slurm/{inner}"
        self._queue = JobQueue()
        self._lock = threading.Lock()   # the probe and the venv builder, made once
        self._probed: Path | None = None
        self._probe_error: EnvironmentUnavailable | None = None
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
                job_id = self._queue.submit(argv)
                end = self._queue.wait(job_id, "results directory check", cancelled, progress,
                                 timeout_s)
                if end.state not in LOST:
                    break
            seen = mark.read_text(encoding="utf-8") if mark.exists() else None
            if seen != job_id:
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
        job_id = self._queue.submit(argv)
        start = time.monotonic()
        end = self._queue.wait(job_id, cell.id, request.cancelled, progress, outdir=outdir)
        return outcome_of(end, request, self.spec, log, time.monotonic() - start, argv)

    def cleanup(self) -> int:
        """Cancel the jobs this sweep submitted that are still queued or running."""
        return self._queue.cancel_all()
