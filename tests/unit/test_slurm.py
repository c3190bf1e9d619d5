"""`slurm:` in the matrix, the sbatch command per cell, Slurm's end states -> outcomes,
the job's GPUs, and the pyxis command; no Slurm needed (the `slurm` tests run it)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from harness import matrixfile
from harness.analysis.decision import within_run
from harness.errors import SpecError
from harness.matrixfile.model import Matrix, SlurmSpec
from harness.protocol.ingest import Series
from harness.runtimes import Engines
from harness.runtimes.base import ImageInfo, RunOutcome, RunRequest
from harness.runtimes.slurm import (
    JobEnd,
    SlurmRuntime,
    cell_from_json,
    cell_to_json,
    duration_s,
    job_gpus,
    job_mem,
    outcome_from_json,
    outcome_of,
    outcome_to_json,
    pyxis_command,
    sbatch_args,
)


def matrix(tmp_path: Path, slurm: str, runtime: str = "local", gpu: str = "[0, none]",
           extra: str = "") -> Matrix:
    (tmp_path / "s.py").write_text("def setup(p):\n    return 0\n\ndef step(s):\n    pass\n")
    image = "python3" if runtime == "local" else "nvcr.io/nvidia/tensorflow:22.12-tf1-py3"
    path = tmp_path / "matrix.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: demo
        runtime: {runtime}
        defaults: {{timeout: 10m, mem_limit: 1g}}
        matrix:
          image: [{image}]
          gpu: {gpu}
          scenario: [s.py]
        {extra}
        """) + slurm)
    return matrixfile.load(path)


def error(tmp_path: Path, slurm: str, **kw: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        matrix(tmp_path, slurm, **kw)
    return info.value


def test_slurm_block_is_parsed(tmp_path: Path) -> None:
    m = matrix(tmp_path, "slurm:\n  partition: gpu\n  account: lab\n  time: 30m\n"
               "  gpu-type: a100\n  options: [--qos=high, --constraint=sxm]\n")
    assert m.slurm == SlurmSpec(partition="gpu", account="lab", time=1800.0, gpu_type="a100",
                                options=("--qos=high", "--constraint=sxm"))
    assert matrix(tmp_path, "").slurm is None
    assert matrix(tmp_path, "slurm: {}\n").slurm == SlurmSpec()


@pytest.mark.parametrize(("block", "path", "line", "words"), [
    ("slurm:\n  partion: gpu\n", "slurm.partion", 10, "unknown key 'partion'"),
    ("slurm:\n  time: soon\n", "slurm.time", 10, "bad duration"),
    ("slurm:\n  gpu_type: a 100\n", "slurm.gpu_type", 10, "Slurm name"),
    ("slurm:\n  options: [--gres=gpu:2]\n", "slurm.options[0]", 10, "harness sets --gres"),
    ("slurm:\n  options: [qos]\n", "slurm.options[0]", 10, "not an sbatch option"),
    ("slurm:\n  mem: lots\n", "slurm.mem", 10, "bad size"),
    ("slurm: [gpu]\n", "slurm", 9, "expected a mapping"),
])
def test_bad_slurm_blocks_name_file_key_line(tmp_path: Path, block: str, path: str, line: int,
                                             words: str) -> None:
    err = error(tmp_path, block)
    assert (err.path, err.line) == (path, line)
    assert words in str(err)
    assert str(err).startswith(f"{tmp_path / 'matrix.yaml'}:{line}:")


def test_slurm_refuses_hosts_pyxis_on_local_and_gpu_all_without_count(tmp_path: Path) -> None:
    err = error(tmp_path, "slurm: {}\n", runtime="docker",
                extra="hosts: [unix:///var/run/docker.sock, ssh://root@box]")
    assert "hosts" in str(err) and "fix: drop `hosts:`" in str(err)
    assert "use `runtime: docker`" in str(error(tmp_path, "slurm: {pyxis: true}\n"))
    assert "gpus_per_node" in str(error(tmp_path, "slurm: {}\n", gpu="[all]"))
    m = matrix(tmp_path, "slurm: {gpus_per_node: 8, gpu_type: h100}\n", gpu="[all]")
    assert "--gres=gpu:h100:8" in sbatch_args(m.cells[0], m.slurm or SlurmSpec(), Path("j.sh"),
                                             Path("l"), "n")


def test_each_cell_asks_for_its_gpus_memory_and_time(tmp_path: Path) -> None:
    m = matrix(tmp_path, "slurm: {partition: gpu, account: lab, gpu_type: rtx3090, "
               "options: [--qos=high]}\n")
    s = m.slurm or SlurmSpec()
    gpu_cell, cpu_cell = sorted(m.cells, key=lambda c: c.gpu.value)
    args = sbatch_args(gpu_cell, s, Path("/r/job.sh"), Path("/r/slurm.log"), "harness-x")
    assert args == ["sbatch", "--parsable", "--job-name=harness-x", "--output=/r/slurm.log",
                    "--no-requeue", "--nodes=1", "--ntasks=1", "--time=12",
                    "--partition=gpu", "--account=lab", "--gres=gpu:rtx3090:1",
                    "--mem=1280M", "--qos=high", "/r/job.sh"]
    cpu_args = sbatch_args(cpu_cell, s, Path("j"), Path("l"), "n")
    assert not any(a.startswith("--gres") for a in cpu_args)
    assert job_mem(cpu_cell, SlurmSpec(mem="8g")) == "8g"
    assert "--time=1" in sbatch_args(cpu_cell, SlurmSpec(time=20.0), Path("j"), Path("l"), "n")


def test_engines_wrap_the_matrix_runtime_in_slurm(tmp_path: Path) -> None:
    m = matrix(tmp_path, "slurm: {}\n", runtime="docker", gpu="[none]")
    rt = Engines.for_matrix(m, m.runtime).default
    assert isinstance(rt, SlurmRuntime)
    assert (rt.name, rt.inner, rt.queues_cells) == ("slurm/docker", "docker", True)
    assert Engines.for_matrix(m, "local").default.name == "slurm/local"


def test_cell_spec_round_trips_through_json(tmp_path: Path) -> None:
    m = matrix(tmp_path, "slurm: {}\n")
    for cell in m.cells:
        assert cell_from_json(json.loads(json.dumps(cell_to_json(cell)))) == cell
    out = RunOutcome(exit_code=137, oom_killed=True, duration_s=1.5, log_tail="x",
                     host_samples=[{"t": 0.1, "rss": 5}], details={"a": 1})
    back = outcome_from_json(json.loads(json.dumps(outcome_to_json(out))))
    assert back == out


@pytest.mark.parametrize(("inner", "env", "want"), [
    ("docker", {"SLURM_JOB_GPUS": "2,3", "CUDA_VISIBLE_DEVICES": "0,1"}, "2,3"),
    ("local", {"SLURM_JOB_GPUS": "2,3", "CUDA_VISIBLE_DEVICES": "0,1"}, "0,1"),
    ("docker", {"CUDA_VISIBLE_DEVICES": "1"}, "1"),
    ("local", {"CUDA_VISIBLE_DEVICES": "NoDevFiles"}, None),
])
def test_job_gpus(inner: str, env: dict[str, str], want: str | None) -> None:
    assert job_gpus(inner, env) == want


def _request(tmp_path: Path, m: Matrix) -> RunRequest:
    cell = next(c for c in m.cells if c.gpu.wants_gpu)
    out = tmp_path / "reports" / "cells" / cell.id
    out.mkdir(parents=True)
    return RunRequest(cell, ImageInfo(ref=cell.image.ref), out, out / "stop")


def test_pyxis_command_mounts_agent_scenario_and_output(tmp_path: Path) -> None:
    m = matrix(tmp_path, "slurm: {pyxis: true}\n", runtime="docker")
    req = _request(tmp_path, m)
    argv = pyxis_command(req, "0,1")
    assert argv[:2] == ["srun", "--ntasks=1"]
    assert "--container-image=nvcr.io#nvidia/tensorflow:22.12-tf1-py3" in argv
    mounts = next(a for a in argv if a.startswith("--container-mounts="))
    assert f"{tmp_path}:/harness/scenario:ro" in mounts
    assert f"{req.outdir}:/harness/out" in mounts and "/harness/agent:ro" in mounts
    assert "--gpus=2" in argv
    assert argv[argv.index("python3") + 1] == "/harness/agent/agent.py"
    assert "/harness/scenario/s.py" in argv


def test_explains_attribution_kinds_reach_the_job(tmp_path: Path) -> None:
    """`harness explain` on a Slurm matrix: the job's spec carries --attribute's kinds,
    and the node's agent gets them."""
    import dataclasses

    from harness.runtimes.slurm import write_spec

    m = matrix(tmp_path, "slurm: {pyxis: true}\n", runtime="docker")
    req = dataclasses.replace(_request(tmp_path, m), attribute=("heap", "device"))
    spec = tmp_path / "spec.json"
    write_spec(spec, req, "pyxis", None)
    assert json.loads(spec.read_text())["attribute"] == ["heap", "device"]
    argv = pyxis_command(req, "0")
    assert argv[argv.index("--attribute") + 1] == "heap,device"


def _outcome(tmp_path: Path, state: str, code: int | None, sig: int | None,
             written: RunOutcome | None = None) -> tuple[RunOutcome, str]:
    tmp_path.mkdir()
    m = matrix(tmp_path, "slurm: {}\n")
    req = _request(tmp_path, m)
    if written is not None:
        (req.outdir / "outcome.json").write_text(json.dumps(outcome_to_json(written)))
    (req.outdir / "slurm.log").write_text("last words\n")
    got = outcome_of(JobEnd("7", state, code, sig, 75.0, "node1"), req, m.slurm or SlurmSpec(),
                     req.outdir / "slurm.log", 80.0, ["sbatch"])
    return got, within_run(Series(), got, m.analysis).verdict


def test_slurm_end_states_map_to_outcomes(tmp_path: Path) -> None:
    got, verdict = _outcome(tmp_path / "a", "TIMEOUT", 0, 15)
    assert got.timed_out and verdict == "timeout" and got.duration_s == 75.0
    got, verdict = _outcome(tmp_path / "b", "OUT_OF_MEMORY", 0, 125)
    assert (got.exit_code, got.oom_killed, verdict) == (137, True, "oom")
    assert got.mem_limit_bytes == 1280 * 2**20
    got, verdict = _outcome(tmp_path / "c", "NODE_FAIL", 0, 0)
    # an error: the orchestrator runs the cell once more, then records a crash
    assert got.error == "Slurm job 7 ended NODE_FAIL on node1" and verdict == "crash"
    got, verdict = _outcome(tmp_path / "d", "FAILED", 3, 0)
    assert got.exit_code == 3 and "last words" in got.log_tail and verdict == "crash"
    container = RunOutcome(exit_code=137, oom_killed=True, mem_limit_bytes=2**30)
    got, verdict = _outcome(tmp_path / "e", "COMPLETED", 0, 0, container)
    assert verdict == "oom" and got.details["slurm"]["state"] == "COMPLETED"


def test_slurm_durations() -> None:
    assert duration_s("00:01:15") == 75.0
    assert duration_s("1-00:00:01") == 86401.0
    assert duration_s("02:03") == 123.0
    assert duration_s("") is None
