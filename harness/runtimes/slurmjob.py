"""One cell inside a Slurm job: `python -m harness _cell SPEC.json` on the node.

The submitting harness writes the cell, its prepared image and its output directory
as JSON next to the job script; here the cell runs as it would on a workstation,
through the node's Docker engine (`runtime: docker`), its interpreter or venv
(`runtime: local`) or pyxis (`srun --container-image`), with the job's GPUs. What
the run returned goes to `outcome.json` in the cell's directory, which the
submitting harness reads once Slurm says the job ended. SIGTERM (scancel, the job's
time limit) ends the cell the way Ctrl-C does: its container is killed and removed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
from pathlib import Path
from types import MappingProxyType
from typing import Any

from harness.errors import HarnessError
from harness.matrixfile.model import (
    Cell,
    GpuSel,
    Host,
    ImageSpec,
    RunSettings,
    ScenarioSpec,
    abilities,
)
from harness.runtimes import process
from harness.runtimes.base import AGENT_DIR, ImageInfo, RunOutcome, RunRequest
from harness.runtimes.factories import get_runtime
from harness.runtimes.local import LocalRuntime, _tail
from harness.signals import interruptible

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
    """The GPUs Slurm gave the job, as the runtime must name them.

    Docker's device request and pyxis name GPUs as the node does (SLURM_JOB_GPUS holds
    the node's indices); a process in the job sees CUDA_VISIBLE_DEVICES, which Slurm
    renumbers from 0 where it constrains devices.
    """
    order = (("SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES") if inner != "local"
             else ("CUDA_VISIBLE_DEVICES", "SLURM_JOB_GPUS"))
    for name in order:
        value = environ.get(name, "").strip()
        if value and value != "NoDevFiles":
            return value
    return None


def pyxis_command(request: RunRequest, gpus: str | None) -> list[str]:
    """`srun --container-image=IMAGE --container-mounts=...` running the agent.

    pyxis (NVIDIA's Slurm plugin over enroot) imports the image on the node and runs
    the step inside it with the job's GPUs; the agent, the scenario's directory
    (read-only) and the cell's output directory are mounted where the Docker runtime
    mounts them, so the agent's arguments are the same.
    """
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


def main(argv: list[str]) -> int:
    """`harness _cell SPEC.json`: run one cell here (inside a Slurm job)."""
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
            return _run(spec_path, progress)
    except HarnessError as exc:
        print(f"harness[_cell]: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    except KeyboardInterrupt:
        progress("cancelled (the cell's container or process is stopped)")
        return 130
    finally:
        # The submitting harness waits for this after scancel: Slurm calls the job
        # CANCELLED at once, before its container is gone.
        if started.exists():
            (spec_path.parent / ENDED).touch()


def _run(spec_path: Path, progress: Any) -> int:
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
        # The node's engine pulls the image when it lacks it; the digest is the node's.
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
