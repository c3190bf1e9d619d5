"""A cell's within-run measurement as a list of stages (`STAGES`) over one `CellRun`:
prepare the image -> GPU precheck -> run attempts; then its result (`Measured`)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

from harness import analysis
from harness.errors import EngineUnavailable, EnvironmentUnavailable
from harness.matrixfile.model import Cell
from harness.result.build import cell_result, timings_of
from harness.result.model import Timings, Unavailable
from harness.runtimes.base import ImageInfo, RunOutcome
from harness.stages.attempts import run_attempts
from harness.stages.context import CellRun, Context, Measured

UNSUPPORTED_DEADLINE_S = 300.0


def prepare_image(ctx: Context, run: CellRun) -> None:
    """The cell's image, pulled or built once per host; one that cannot be had (a pull
    that fails, a pin that does not install) settles the cell as `unavailable`."""
    ctx.store.cell_dir(run.cell.id, fresh=True)   # emptied for a (new) run
    try:
        run.info = ctx.images.get(run.cell)
    except EnvironmentUnavailable as exc:
        text = str(exc).strip()
        reason = text.splitlines()[0] if text else type(exc).__name__
        what = "engine" if isinstance(exc, EngineUnavailable) else "image"
        run.wait_s = time.monotonic() - run.started
        run.info, run.ended = ImageInfo(ref=run.cell.image.ref), RunOutcome(None, error=text)
        run.unavailable = Unavailable(what, text)
        run.verdict = analysis.decide(analysis.CellFacts(ctx.cfg, unavailable=reason))
        return
    run.wait_s = time.monotonic() - run.started
    run.t0 = time.monotonic()
    run.runtime = ctx.runtime_for(run.cell)


def gpu_precheck(ctx: Context, run: CellRun) -> None:
    """not-applicable settles the cell without a run; unsupported runs it briefly (what
    happens then decides)."""
    assert run.info is not None
    pre = ctx.gpus.precheck(run.cell, run.info)
    if pre is not None and pre[0] == "not-applicable":
        run.verdict = analysis.decide(analysis.CellFacts(ctx.cfg, precheck=pre))
    elif pre is not None and pre[0] == "unsupported":
        s = run.cell.settings
        short = dataclasses.replace(s, timeout=min(s.timeout, UNSUPPORTED_DEADLINE_S))
        run.run_cell = dataclasses.replace(run.cell, scenario=dataclasses.replace(
            run.cell.scenario, settings=short))
        pre = (pre[0], f"{pre[1]} (deadline {short.timeout:.0f}s)")
        ctx.progress(f"{run.cell.id}: {pre[1]}")
    run.precheck = pre


STAGES: tuple[Callable[[Context, CellRun], None], ...] = (
    prepare_image, gpu_precheck, run_attempts)


def measure(ctx: Context, cell: Cell) -> Measured:
    """Run the cell through `STAGES` and return its within-run result. Nothing is written
    but the agent's samples: the result is written once its row is compared."""
    run = CellRun(cell)
    for stage in STAGES:
        stage(ctx, run)
        if run.verdict is not None:   # settled before any run (no image, no GPU)
            break
    return result(ctx, run)


def result(ctx: Context, run: CellRun) -> Measured:
    """The cell's within-run result, from everything its stages left."""
    assert run.verdict is not None and run.info is not None
    now = time.monotonic()
    if run.unavailable is not None:
        timings = Timings(cell_s=run.wait_s, prepare_s=run.wait_s)
    elif not run.attempts:
        timings = Timings(cell_s=now - run.t0, prepare_s=run.info.prepare_s)
    else:
        timings = timings_of(run.info, run.series, run.run_s, run.analyse_s, run.wait_s,
                             now - run.t0)
    runtime = run.runtime or ctx.runtime_for(run.cell)
    res = cell_result(run.cell, run.verdict, run.series, run.ended, info=run.info,
                      runtime=runtime.name, script=_rel(ctx, run.cell.scenario.script),
                      gpus=ctx.gpus.seen.get(run.cell.host.label), attempts=run.attempts,
                      timings=timings, unavailable=run.unavailable)
    return Measured(res, run.verdict, run.series)


def _rel(ctx: Context, path: Path) -> str:
    try:
        return str(path.relative_to(ctx.matrix.file.resolve().parent))
    except ValueError:
        return str(path)
