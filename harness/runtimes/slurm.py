"""Cells as Slurm jobs: `slurm:` wraps the matrix's runtime, and each cell is one `sbatch`
job run on the node by `harness _cell SPEC.json` (`main`). Results come back through a
shared results directory (checked by a probe job first). One poller asks `squeue` about
all jobs at once. `cluster_checks` is `harness doctor` for a matrix with `slurm:`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shlex
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from harness.errors import EnvironmentUnavailable, HarnessError, interruptible
from harness.matrixfile.model import (
    Cell,
    GpuSel,
    Host,
    ImageSpec,
    Matrix,
    RunSettings,
    ScenarioSpec,
    SlurmSpec,
    abilities,
)
from harness.runtimes import process
from harness.runtimes.base import (
    AGENT_DIR,
    Check,
    ImageInfo,
    Progress,
    RunOutcome,
    RunRequest,
    Runtime,
    RuntimeBase,
    parse_size,
)
from harness.runtimes.local import LocalRuntime, _tail


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
        """sinfo answers, and Slurm would accept each kind of job (`sbatch --test-only`)."""
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
        """local: build the venv here, in a shared cache; containers: the node pulls."""
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
        """Once per results directory: a tiny job must write a file there seen here.

        Raises:
            EnvironmentUnavailable: the file did not appear, or the job did not end
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


# ---------------------------------------------- one cell inside a Slurm job

SPEC_VERSION = 1
OUTCOME = "outcome.json"
STARTED, ENDED = ".cell-started", ".cell-ended"


def cell_to_json(cell: Cell) -> dict[str, Any]:
    settings = {f.name: getattr(cell.settings, f.name) for f in
                dataclasses.fields(cell.settings)}
    settings["env"] = dict(cell.settings.env)
    return {"id": cell.id,
            "image": {"label": cell.image.label, "ref": cell.image.ref,
                      "index": cell.image.index, "pip": list(cell.image.pip),
                      "python": cell.image.python, "as_of": cell.image.as_of},
            "gpu": cell.gpu.value,
            "scenario": {"id": cell.scenario.id, "script": str(cell.scenario.script),
                         "params": dict(cell.scenario.params), "settings": settings},
            "host": {"label": cell.host.label, "url": cell.host.url}}


def cell_from_json(d: dict[str, Any]) -> Cell:
    sc = d["scenario"]
    settings = dict(sc["settings"])
    settings["env"] = MappingProxyType(dict(settings.get("env") or {}))
    img = d["image"]
    return Cell(id=d["id"],
                image=ImageSpec(label=img["label"], ref=img["ref"], index=img["index"],
                                pip=tuple(img["pip"]), python=img["python"],
                                as_of=img.get("as_of")),
                gpu=GpuSel(d["gpu"]),
                scenario=ScenarioSpec(id=sc["id"], script=Path(sc["script"]),
                                      params=MappingProxyType(dict(sc["params"])),
                                      settings=RunSettings(**settings)),
                host=Host(d["host"]["label"], d["host"]["url"]))


def write_spec(path: Path, request: RunRequest, inner: str, docker_host: str | None) -> None:
    """The job's instructions: `inner` is docker, local or pyxis."""
    info = dataclasses.asdict(request.image)
    info["env"] = list(request.image.env)
    data = {"version": SPEC_VERSION, "inner": inner, "docker_host": docker_host,
            "cell": cell_to_json(request.cell), "image": info,
            "outdir": str(request.outdir.absolute()),
            "control": str(request.control.absolute()),
            "attribute": list(request.attribute)}
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")


def outcome_to_json(outcome: RunOutcome) -> dict[str, Any]:
    data = outcome.to_dict()
    data["host_samples"] = outcome.host_samples
    return data


def outcome_from_json(d: dict[str, Any]) -> RunOutcome:
    return RunOutcome(exit_code=d.get("exit_code"), timed_out=bool(d.get("timed_out")),
                      oom_killed=bool(d.get("oom_killed")), error=d.get("error"),
                      duration_s=float(d.get("duration_s") or 0.0),
                      host_samples=list(d.get("host_samples") or []),
                      log_tail=str(d.get("log_tail") or ""),
                      mem_limit_bytes=d.get("mem_limit_bytes"),
                      details=dict(d.get("details") or {}))


def job_gpus(inner: str, environ: dict[str, str]) -> str | None:
    """The GPUs Slurm gave the job, as the runtime names them (node's or renumbered)."""
    order = (("SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES") if inner != "local"
             else ("CUDA_VISIBLE_DEVICES", "SLURM_JOB_GPUS"))
    for name in order:
        value = environ.get(name, "").strip()
        if value and value != "NoDevFiles":
            return value
    return None


def pyxis_command(request: RunRequest, gpus: str | None) -> list[str]:
    """`srun --container-image=IMAGE ...` running the agent under pyxis, mounted as docker's."""
    cell = request.cell
    script = cell.scenario.script
    mounts = ",".join([f"{AGENT_DIR}:/harness/agent:ro",
                       f"{script.parent}:/harness/scenario:ro",
                       f"{request.outdir.absolute()}:/harness/out"])
    image = request.image.ref
    # enroot names a registry with '#': nvcr.io#nvidia/tensorflow:22.12-tf1-py3
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        image = f"{first}#{rest}"
    args = request.agent_args("/harness/agent/agent.py", f"/harness/scenario/{script.name}",
                              "/harness/out/samples.jsonl",
                              f"/harness/out/{request.control.name}")
    env = ",".join(["ALL", *sorted(f"{k}={v}" for k, v in request.environment().items())])
    argv = ["srun", "--ntasks=1", f"--container-image={image}",
            f"--container-mounts={mounts}", "--container-workdir=/harness/scenario",
            "--no-container-mount-home", f"--export={env}"]
    if gpus:
        argv.append(f"--gpus={len(gpus.split(','))}")
    return [*argv, request.image.python, *args]


def main(argv: list[str], get_runtime: Callable[[str, str | None], Runtime]) -> int:
    """`harness _cell SPEC.json`: run one cell here, inside a Slurm job."""
    if len(argv) != 1:
        print("usage: harness _cell SPEC.json (run by Slurm jobs harness submits)",
              file=sys.stderr)
        return 2

    def progress(text: str) -> None:
        print(f"harness[_cell]: {text}", file=sys.stderr, flush=True)

    spec_path = Path(argv[0])
    started = spec_path.parent / STARTED
    try:
        with interruptible():
            started.touch()
            return _run(spec_path, progress, get_runtime)
    except HarnessError as exc:
        print(f"harness[_cell]: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    except KeyboardInterrupt:
        progress("cancelled (the cell's container or process is stopped)")
        return 130
    finally:
        # The submitter waits for this after scancel: CANCELLED comes before cleanup.
        if started.exists():
            (spec_path.parent / ENDED).touch()


def _run(spec_path: Path, progress: Any,
         get_runtime: Callable[[str, str | None], Runtime]) -> int:
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    if spec.get("version") != SPEC_VERSION:
        print(f"harness[_cell]: {spec_path}: spec version {spec.get('version')} is not "
              f"{SPEC_VERSION}; the node runs another harness than the submitter",
              file=sys.stderr)
        return 2
    inner = spec["inner"]
    cell = cell_from_json(spec["cell"])
    gpus = job_gpus(inner, dict(os.environ)) if cell.gpu.wants_gpu else None
    if gpus is not None:
        cell = dataclasses.replace(cell, gpu=GpuSel(gpus))
    info_d = dict(spec["image"])
    info_d["env"] = tuple(info_d.get("env") or ())
    info = ImageInfo(**info_d)
    outdir = Path(spec["outdir"])
    cancel = threading.Event()
    request = RunRequest(cell, info, outdir, Path(spec["control"]), cancel,
                         attribute=tuple(str(k) for k in spec.get("attribute") or ()))
    details: dict[str, Any] = {"node": os.uname().nodename,
                               "slurm_job": os.environ.get("SLURM_JOB_ID"),
                               "job_gpus": gpus}
    if inner == "pyxis":
        outcome = _run_pyxis(request, gpus)
    elif abilities(inner).container_images:   # docker, podman: the node's engine
        rt = get_runtime(inner, spec.get("docker_host"))
        info = rt.prepare(cell.image, progress)
        request = dataclasses.replace(request, image=info)
        details["image"] = {"digest": info.digest, "prepare_s": round(info.prepare_s, 3)}
        outcome = rt.run(request, progress)
    else:
        outcome = LocalRuntime().run(request, progress)
    outcome.details.update(details)
    tmp = outdir / f".{OUTCOME}.tmp"
    tmp.write_text(json.dumps(outcome_to_json(outcome)), encoding="utf-8")
    os.replace(tmp, outdir / OUTCOME)
    return 0


def _run_pyxis(request: RunRequest, gpus: str | None) -> RunOutcome:
    log = request.outdir / "agent.log"
    finished = process.run_with_deadline(pyxis_command(request, gpus), env=dict(os.environ),
                                         log=log, deadline_s=request.cell.settings.timeout)
    code = finished.returncode
    return RunOutcome(exit_code=code, timed_out=finished.timed_out,
                      oom_killed=False, duration_s=finished.duration_s,
                      log_tail=_tail(log, 8000), details={"runner": "pyxis"})


# ---------------------------------------------- asking Slurm about jobs

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
    """The sweep's jobs: submitted, waited for (one JobWatcher), cancelled on Ctrl-C."""

    def __init__(self) -> None:
        self._jobs: set[str] = set()
        self._lock = threading.Lock()
        self._watcher: JobWatcher | None = None

    def submit(self, argv: list[str]) -> str:
        """sbatch; the job id.

        Raises:
            EnvironmentUnavailable: Slurm refused the job.
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


# ---------------------------------------------- a cell's job: its sbatch line, what its end means

HEADROOM = 256 * 2**20     # the `_cell` process beside the cell, in the job's memory
TIME_MARGIN_S = 120.0      # our own deadline fires first; Slurm's limit is the backstop
HARNESS_ROOT = Path(__file__).resolve().parent.parent.parent
LOST = ("NODE_FAIL", "PREEMPTED", "BOOT_FAIL")


def gres(cell: Cell, spec: SlurmSpec) -> str | None:
    """`gpu[:TYPE]:N` for the cell's GPUs: one GPU, or slurm.gpus_per_node for `all`."""
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
    """The batch script: this harness's interpreter and code, at paths the nodes share."""
    return ("#!/bin/sh\n# Written by harness: one cell of a sweep, run by Slurm.\n"
            f"export PYTHONPATH={shlex.quote(str(HARNESS_ROOT))}${{PYTHONPATH:+:$PYTHONPATH}}\n"
            f"exec {' '.join(shlex.quote(a) for a in command)}\n")


def outcome_of(end: JobEnd, request: RunRequest, spec: SlurmSpec, log: Path, waited_s: float,
               argv: list[str]) -> RunOutcome:
    """The cell's outcome from `_cell`'s outcome.json and the job's end state."""
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


# ---------------------------------------------- harness doctor for a matrix with slurm:

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
