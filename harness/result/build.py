"""A CellResult from what a cell's run left. The agent's records come from inside the
image, so a field of the wrong type is left out and said in `problems`, never fatal.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from harness.gpu.host import reconcile
from harness.result.codec import JSON, DecodeError, as_json, decode
from harness.result.model import (
    AgentEnd,
    Attempt,
    CellResult,
    Fingerprint,
    GpuFact,
    GpuPart,
    HostPart,
    ImagePart,
    Outcome,
    Reconcile,
    ScenarioPart,
    Summary,
    Timings,
    Unavailable,
)
from harness.result.runkey import key_of
from harness.runtimes.base import RunOutcome

if TYPE_CHECKING:
    from harness.analysis.decision import CellVerdict
    from harness.gpu.host import HostGpus
    from harness.matrixfile.model import Cell
    from harness.protocol.series import Series
    from harness.runtimes.base import ImageInfo

END_KEYS = ("status", "error", "info", "phases", "iterations", "warmup", "stopped_early",
            "mode", "elapsed_s", "sampling_s", "output_dropped", "budget_spent", "memory_stop")
FINGERPRINT_KEYS = ("python", "implementation", "platform", "hostname", "env", "packages",
                    "gpu", "gpu_reason", "heap", "pythonmalloc", "cgroup", "cpu_count")
HOST_SAMPLES_KEPT = 2000
T = TypeVar("T")


def cell_result(cell: Cell, verdict: CellVerdict, series: Series, ended: RunOutcome, *,
                info: ImageInfo, runtime: str, script: str, gpus: HostGpus | None,
                attempts: Sequence[Attempt], timings: Timings,
                unavailable: Unavailable | None = None) -> CellResult:
    """The cell's result (its within-run verdict until the row comparison replaces it).

    Args:
        script: The scenario script as the result names it (relative to the matrix).
        gpus: The host's GPUs as its engine showed them, if known.
    """
    problems = list(series.problems)
    header = dict(series.header or {})
    fingerprint = (_lenient(Fingerprint, {k: header.get(k) for k in FINGERPRINT_KEYS},
                            "header", problems)
                   if any(k in header for k in FINGERPRINT_KEYS) else Fingerprint())
    end = dict(series.end or {})
    dropped = end.get("output_dropped")
    if isinstance(dropped, int) and dropped > 0:
        problems.append(f"agent.log: {dropped} bytes of the scenario's output dropped past "
                        "the agent's cap (4 MiB kept)")
    settings = _object({f.name: (dict(getattr(cell.settings, f.name)) if f.name == "env"
                                 else getattr(cell.settings, f.name))
                        for f in dataclasses.fields(cell.settings)}, "settings")
    samples = [as_json(s, "host_samples") for s in ended.host_samples[-HOST_SAMPLES_KEPT:]]
    return CellResult(
        id=cell.id, row=cell.row, verdict=verdict.verdict, reason=verdict.reason,
        image=ImagePart(cell.image.label, cell.image.index, cell.image.ref, info.digest,
                        dict(info.labels), tuple(cell.image.pip)),
        gpu=GpuPart(cell.gpu.value, cell.gpu.label),
        scenario=ScenarioPart(cell.scenario.id, script,
                              _object(dict(cell.scenario.params), "scenario.params")),
        settings=settings,
        runtime=runtime, key=key_of(cell, runtime),
        host=host_part(cell.host.label, cell.host.url, gpus),
        carrier=verdict.carrier, findings=tuple(verdict.findings),
        memory=dict(verdict.memory), steps=verdict.steps, cpu_steps=verdict.cpu_steps,
        contention=verdict.contention, gpu_time=verdict.gpu_time, live=verdict.live,
        vs_baseline=verdict.vs_baseline, rule=verdict.rule, facts=verdict.facts,
        summary=summarise(series),
        outcome=Outcome(ended.exit_code, ended.timed_out, ended.oom_killed, ended.error,
                        round(ended.duration_s, 3), ended.log_tail[-4000:],
                        ended.mem_limit_bytes, _object(ended.details, "outcome.details"),
                        len(ended.host_samples)),
        host_samples=tuple(s for s in samples if isinstance(s, dict)),
        reconcile=decode(Reconcile, as_json(reconcile(
            series.samples, ended.host_samples,
            list(ended.details.get("host_gpu") or [])), "reconcile")),
        fingerprint=fingerprint,
        end=_lenient(AgentEnd, {k: end.get(k) for k in END_KEYS}, "end", problems),
        problems=tuple(problems), skipped_lines=series.skipped,
        attempts=tuple(attempts), timings=timings, unavailable=unavailable)


def run_outcome(res: CellResult) -> RunOutcome:
    """How a recorded cell's run ended, as its runtime said it."""
    o = res.outcome
    return RunOutcome(o.exit_code, o.timed_out, o.oom_killed, o.error, o.duration_s,
                      [dict(s) for s in res.host_samples], o.log_tail, o.mem_limit_bytes,
                      dict(o.details))


def timings_of(info: ImageInfo, series: Series, run_s: float, analyse_s: float,
               wait_s: float, cell_s: float) -> Timings:
    """Where a cell's time went: pull/build (and how much of it the cell waited for),
    container start and agent phases (import, setup, warm-up, measure), analysis."""
    phases = (series.end or {}).get("phases") or {}
    agent_s = float((series.end or {}).get("elapsed_s") or 0.0)
    agent = {f"{k}_s": float(phases[k]) for k in ("import", "setup", "warmup", "measure",
                                                  "teardown", "script")
             if isinstance(phases.get(k), int | float)}
    return Timings(cell_s=cell_s, prepare_s=info.prepare_s, waited_for_image_s=wait_s,
                   run_s=run_s,
                   start_and_exit_s=max(0.0, run_s - agent_s) if agent_s else run_s,
                   analyse_s=analyse_s, **agent)


def summarise(series: Series) -> Summary:
    """The run's calls, time per call (own step time; --as-user's where timed) and peak
    RSS (see `Summary`)."""
    cols, user = series.cols, series.as_user()
    return Summary(series.measured, cols.own_step if user is None else user[1],
                   cols.peaks.get("rss"), cols.median_step, cols.own_step,
                   None if user is None else user[0])


def host_part(label: str, url: str | None, host: HostGpus | None) -> HostPart:
    """The result's `host`: label, URL, this machine, and the GPUs, if known."""
    machine = socket.gethostname()    # the machine the harness ran on
    if host is None:
        return HostPart(label, url, machine)
    cuda = ".".join(map(str, host.cuda_driver)) if host.cuda_driver else None
    return HostPart(label, url, machine,
                    tuple(GpuFact(g.index, g.name, g.uuid,
                                  (g.cc[0], g.cc[1]) if g.cc else None, g.memory_total)
                          for g in host.gpus), host.driver, cuda)


def _object(value: object, path: str) -> dict[str, JSON]:
    found = as_json(value, path)
    assert isinstance(found, dict)
    return found


def _lenient(cls: type[T], data: dict[str, object], what: str, problems: list[str]) -> T:
    """`cls` from the fields of `data` that fit it (None: not sent); the others are said
    in `problems`."""
    def left_out(exc: DecodeError) -> None:
        problems.append(f"{what}: {exc}; left out")

    return decode(cls, {k: v for k, v in data.items() if v is not None}, skip=left_out)
