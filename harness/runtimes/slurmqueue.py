"""Asking Slurm about jobs: one poller for every job of a sweep, and a job's end record.

`squeue -t all` for all of the sweep's jobs at once (one RPC to the controller per
poll, however many cells); once a job left the active states its record comes from
accounting (`sacct`) when the cluster keeps one, else from `scontrol show job` while
the controller still holds the job (MinJobAge).
"""

from __future__ import annotations

import shlex
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.errors import EnvironmentUnavailable
from harness.runtimes import process
from harness.runtimes.base import Progress
from harness.runtimes.slurmjob import ENDED, STARTED

ACTIVE = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED",
          "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED",
          "RESV_DEL_HOLD")
POLL_S = 1.0              # one squeue for all jobs; slower as the sweep grows:
POLL_MAX_S = 10.0         # each poll costs the controller one RPC
CANCEL_GRACE_S = 30.0     # for `_cell` to stop its container after scancel
NO_SLURM_FIX = ("run harness on a Slurm login node (sinfo must answer), or start the "
                "single-node test cluster with `bash images/setup-slurm.sh`")


@dataclass(frozen=True)
class JobEnd:
    job_id: str
    state: str              # COMPLETED, FAILED, TIMEOUT, CANCELLED, OUT_OF_MEMORY, ...
    exit_code: int | None   # the batch script's exit status (ExitCode N:signal)
    signal: int | None
    elapsed_s: float | None
    node: str = ""


def slurm_cli(argv: list[str], timeout: float = 60) -> tuple[int, str]:
    """Run a Slurm command; a missing one is an environment problem (exit 3).

    Raises:
        EnvironmentUnavailable: the command is not installed.
    """
    rc, out = process.check_output(argv, timeout=timeout)
    if rc == 127 and "No such file" in out:
        raise EnvironmentUnavailable(f"`{argv[0]}` is not installed here: {out.strip()}\n"
                                     f"  fix: {NO_SLURM_FIX}")
    return rc, out


def duration_s(text: str) -> float | None:
    """Slurm's `[D-]HH:MM:SS` / `MM:SS` -> seconds."""
    try:
        days, _, rest = text.strip().rpartition("-")
        parts = [float(p) for p in rest.split(":")]
    except ValueError:
        return None
    seconds = 0.0
    for p in parts:
        seconds = seconds * 60 + p
    return seconds + (int(days) * 86400 if days else 0)


def parse_exit(text: str) -> tuple[int | None, int | None]:
    code, _, sig = text.strip().partition(":")
    try:
        return int(code), int(sig or 0)
    except ValueError:
        return None, None


def job_end(job_id: str) -> JobEnd | None:
    """The finished job's record: accounting first, then the controller's copy."""
    # No sacct (or no accounting: sacct says so and exits non-zero): scontrol below.
    rc, out = process.check_output(["sacct", "-X", "-n", "-P", "-j", job_id, "-o",
                                    "JobID,State,ExitCode,Elapsed,NodeList"], timeout=60)
    for line in out.splitlines() if rc == 0 else []:
        f = line.split("|")
        if len(f) >= 5 and f[0] == job_id and f[1].split()[0] not in ACTIVE:
            code, sig = parse_exit(f[2])
            return JobEnd(job_id, f[1].split()[0], code, sig, duration_s(f[3]), f[4])
    rc, out = slurm_cli(["scontrol", "show", "job", "-o", job_id])
    if rc != 0:
        return None
    fields = dict(t.split("=", 1) for t in out.split() if "=" in t)
    state = fields.get("JobState", "")
    if not state or state in ACTIVE:
        return None
    code, sig = parse_exit(fields.get("ExitCode", ""))
    return JobEnd(job_id, state, code, sig, duration_s(fields.get("RunTime", "")),
                  fields.get("NodeList", ""))


class JobWatcher:
    """One thread asks `squeue` about every job of the sweep; waiters get the end."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self._cond = threading.Condition()
        self._waiting: dict[str, str] = {}          # job id -> cell id
        self._seen: dict[str, str] = {}             # job id -> last state
        self._ends: dict[str, JobEnd] = {}
        self._thread: threading.Thread | None = None

    def watch(self, job_id: str, cell_id: str) -> None:
        with self._cond:
            self._waiting[job_id] = cell_id
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, daemon=True,
                                                name="slurm-poll")
                self._thread.start()

    def wait(self, job_id: str, timeout: float) -> JobEnd | None:
        with self._cond:
            self._cond.wait_for(lambda: job_id in self._ends, timeout)
            return self._ends.pop(job_id, None)

    def _loop(self) -> None:
        while True:
            try:
                if self._poll():
                    return
            except Exception as exc:  # a poller that dies leaves every waiter hanging
                self.progress(f"Slurm: polling failed ({type(exc).__name__}: {exc}); "
                              "retrying")
                time.sleep(POLL_MAX_S)

    def _poll(self) -> bool:
        """One round; True when nothing is left to watch (the thread ends)."""
        with self._cond:
            ids = list(self._waiting)
            if not ids:
                self._thread = None
                return True
        try:
            rc, out = slurm_cli(["squeue", "-h", "-t", "all", "-j", ",".join(ids),
                                 "-o", "%i|%T|%r|%N"])
        except EnvironmentUnavailable:
            rc, out = 1, ""
        if rc != 0 and "Invalid job id" not in out:
            time.sleep(POLL_MAX_S)  # the controller did not answer: ask again
            return False
        states: dict[str, list[str]] = {}
        for line in out.splitlines() if rc == 0 else []:
            row = line.strip().split("|")
            if len(row) == 4:
                states[row[0]] = row
        for job_id in ids:
            f = states.get(job_id)
            state = f[1] if f else "GONE"
            if f and state != self._seen.get(job_id):
                self._seen[job_id] = state
                cell = self._waiting[job_id]
                if state == "RUNNING":
                    self.progress(f"{cell}: Slurm job {job_id} running on {f[3]}")
                elif state == "PENDING" and f[2] not in ("None", "Priority"):
                    self.progress(f"{cell}: Slurm job {job_id} pending ({f[2]})")
            if state in ACTIVE:
                continue
            end = job_end(job_id)
            if end is None and state != "GONE":
                continue  # accounting has not caught up yet
            with self._cond:
                self._ends[job_id] = end or JobEnd(job_id, "UNKNOWN", None, None, None)
                self._waiting.pop(job_id, None)
                self._seen.pop(job_id, None)
                self._cond.notify_all()
        time.sleep(min(POLL_MAX_S, POLL_S + len(ids) / 100))
        return False


class JobQueue:
    """The sweep's jobs: submitted here, waited for through one JobWatcher, cancelled
    together on Ctrl-C."""

    def __init__(self) -> None:
        self._jobs: set[str] = set()
        self._lock = threading.Lock()
        self._watcher: JobWatcher | None = None

    def submit(self, argv: list[str]) -> str:
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

    def wait(self, job_id: str, cell_id: str, cancelled: Callable[[], bool],
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

    def cancel_all(self) -> int:
        """scancel every job still queued or running; how many there were."""
        with self._lock:
            jobs = sorted(self._jobs)
        if jobs:
            slurm_cli(["scancel", *jobs])
        return len(jobs)
