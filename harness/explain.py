"""`harness explain` and `--explain`: where a row's first bad cell leaks or slows, against
its last good. Both cells run again with the agent's `--attribute` into `explain/<cell>/`;
the where records are ranked and matched (`analysis.where`) and written to
`cells/<cell>/where.json`, and the run's reports rewritten (`cli.explain` prints the model
and exit code). The sweep's verdicts never come from these runs: attribution slows a run
many times over.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import linecache
import math
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.analysis.facts import memory_stopped
from harness.analysis.kinds import BAD, GREW, MEMORY, TIME, TIMED, kind
from harness.analysis.rules import WORKERS
from harness.analysis.where import Where, changes, notes, parse_where, summary
from harness.answers.kept import Explanation
from harness.answers.search import Pair, image_after, pairs, unpaired
from harness.app import answer
from harness.app.command import printer
from harness.errors import (
    EXIT_ENVIRONMENT,
    EXIT_OK,
    EXIT_UNDECIDED,
    InputError,
    StoreError,
    interruptible,
    without_out,
)
from harness.matrixfile.model import (
    BUDGET_CAP,
    DEFAULT_BUDGET_S,
    Cell,
    Matrix,
    abilities,
)
from harness.report import Report, write_all
from harness.result.codec import JSON, encode
from harness.result.model import CellResult, DerivedFrom
from harness.result.runkey import key_of
from harness.runtimes import Engines
from harness.stages.context import Context
from harness.stages.orchestrator import Sweep
from harness.store import RunStore
from harness.store.gate import as_recorded, read_gated, refresh_line, why_not_current
from harness.store.results import WHERE_FILE, load_json_keys
from harness.store.runs import EXPLAIN, PLAN_FILE, plan_json

if TYPE_CHECKING:
    from harness.result.model import Planned
    from harness.store.gate import Gated


EXPLAIN_DIR = "explain"


def kinds_for(result: CellResult) -> tuple[str, ...]:
    """The --attribute kinds for the cell's verdict; no memory kinds for a time verdict
    whose memory is not bad (tracemalloc would slow it for nothing)."""
    kinds = kind(result.verdict).attribute
    if result.verdict in TIMED and not larger(result):
        return tuple(k for k in kinds if k not in MEMORY)
    return kinds


def larger(result: CellResult) -> bool:
    """The cell's peak memory read higher than its baseline's."""
    vs = result.vs_baseline
    return vs is not None and vs.peak_rss is not None and vs.peak_rss.direction == "higher"


# memray's native stacks: a second run, only where Python's allocator saw less of the
# heap's growth than NATIVE_SHARE (resolving native stacks of a large process is slow).
NATIVE = ("native",)
NATIVE_SHARE = 0.9
MEMRAY = "memray>=1.10"
# tracemalloc slows an allocating step many times: memory is attributed over fewer calls
# (bytes per call need no long run), time over the cell's own length.
MEMORY_CALLS = 300
TIMEOUT_FACTOR = 4
DEADLINE_FACTOR = 10
TRACEMALLOC_SLOWER = 150.0   # tracemalloc's worst slowdown, with headroom
# Time is attributed over a time budget (a few calls of a fast step give the sampler too
# few samples); ATTRIBUTE_CAP budgets of deadline for a step slowed past the sweep's pace.
ATTRIBUTE_CAP = 10.0
# A cell the safety stop ended is attributed over the calls that grow it to this share of
# the stop's limit, so the stop does not end the attributed run too.
STOP_ROOM = 0.5


def stop_room(res: CellResult) -> tuple[int, str] | None:
    """(most calls, why) keeping a cell the safety stop ended within STOP_ROOM of its
    limit at the sweep's pace; None where the stop did not end it or gave no pace."""
    stop = res.end.memory_stop or {}
    grew, limit, call = (stop.get(k) for k in ("grew", "limit", "call"))
    if res.facts is None or not res.facts.runaway or not isinstance(grew, int | float) \
            or not isinstance(limit, int | float) or not isinstance(call, int) or call < 2 \
            or grew <= 0:
        return None
    each = grew / (call - 1)        # growth counts from the end of the first call
    room = 1 + max(1, int(STOP_ROOM * limit / each))
    return room, (f"fewer calls than the sweep's: the safety stop ended its run, "
                  f"{each / 2**20:,.0f} MiB a call past the first, and {room:,} calls in all "
                  f"grow {STOP_ROOM:.0%} of its {limit / 2**20:,.0f} MiB limit at most")


def attributed(cell: Cell, kinds: Sequence[str], took_s: float | None = None,
               made: int | None = None, room: int | None = None) -> Cell:
    """The cell as an attribution run, with no early stop and no re-runs.

    Time kinds run on a time budget; memory alone runs the sweep's `made` calls (fewer
    under tracemalloc). The deadline is capped by the sweep's pace (`took_s`), so a hanging
    part ends the run, not the session; `room` caps calls after a safety stop."""
    s = cell.settings
    ran = made or s.agent_iterations
    calls = ran
    if room is not None:
        s = dataclasses.replace(s, warmup=min(s.warmup, room // 2))
        calls = max(1, min(calls, room - s.warmup))
    timeout, slower = s.timeout, float(DEADLINE_FACTOR)
    if "heap" in kinds:
        calls, timeout = min(calls, MEMORY_CALLS), s.timeout * TIMEOUT_FACTOR
        slower = TRACEMALLOC_SLOWER
    per_call = took_s / max(ran, 1) if took_s else 0.0
    if set(kinds) & set(TIME):
        budget = max(s.run_budget or 0.0, DEFAULT_BUDGET_S)
        least = min(calls, MEMORY_CALLS)
        if took_s:
            timeout = min(timeout, took_s + (1 + ATTRIBUTE_CAP) * budget
                          + slower * per_call * least + 60.0)
        short = dataclasses.replace(s, budget=budget, budget_calls=least,
                                    max_iterations=max(BUDGET_CAP, least), repeats=0,
                                    timeout=timeout)
    else:
        if took_s:
            timeout = min(timeout, slower * per_call * calls + 60.0)
        # One reading a phase: only the where record is used, and readings cost under
        # tracemalloc.
        short = dataclasses.replace(s, iterations=calls, max_iterations=None, repeats=0,
                                    timeout=timeout, sample_every=max(calls, s.warmup, 1))
    return cell.with_settings(short)


def length(cell: Cell) -> str:
    """An attributed run's length in words: "300 calls", "5 s, 300 calls at least"."""
    s = cell.settings
    if (budget := s.run_budget) is None:
        return f"{s.iterations:,} call{'s' if s.iterations != 1 else ''}"
    return f"{budget:g} s, {s.budget_calls or 0:,} calls at least"


def source_of(cell: Cell) -> Callable[[str, int], str | None]:
    """The scenario's line text by (file name, line), from this machine's copy."""
    script = cell.scenario.script

    def line(name: str, number: int) -> str | None:
        if name != script.name:
            return None
        return linecache.getline(str(script), number).strip() or None

    return line


class AttributionFailed(Exception):
    """The attributed run gave no where record; `timed_out`: its deadline ended it."""

    def __init__(self, message: str, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


# A finished attributed run, kept with its run key so a resumed explain reuses it.
KEPT_RUN = "attributed.json"


def _kept(ctx: Context, cell: Cell, kinds: Sequence[str], outdir: Path
          ) -> tuple[str, tuple[Where, dict[str, JSON]] | None]:
    """The attributed run's key, and the run kept in `outdir` under that key (None)."""
    key = json.dumps([encode(key_of(cell, ctx.runtime_for(cell).name, tuple(kinds))),
                      list(kinds)], sort_keys=True)
    try:
        kept = json.loads((outdir / KEPT_RUN).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return key, None
    if not isinstance(kept, dict) or kept.get("key") != key or not isinstance(
            kept.get("record"), dict):
        return key, None
    w = parse_where(kept["record"])
    errors = kept.get("errors")
    if isinstance(errors, dict):
        w = dataclasses.replace(w, errors={str(k): str(v) for k, v in errors.items()})
    return key, (w, kept["record"])


def run_attributed(ctx: Context, cell: Cell, kinds: Sequence[str], outdir: Path
                   ) -> tuple[Where, dict[str, JSON]]:
    """Run the cell with `--attribute KINDS` and parse its where record (or reuse a kept one)."""
    key, kept = _kept(ctx, cell, kinds, outdir)
    if kept is not None:
        ctx.progress(f"explain {cell.id}: its attributed run in {outdir.name} holds (same "
                     "run key); reused")
        return kept
    w, record = _run_attributed(ctx, cell, kinds, outdir)
    (outdir / KEPT_RUN).write_text(json.dumps({"key": key, "record": record,
                                               "errors": dict(w.errors)}), encoding="utf-8")
    return w, record


def _run_attributed(ctx: Context, cell: Cell, kinds: Sequence[str], outdir: Path
                    ) -> tuple[Where, dict[str, JSON]]:
    ran = ctx.runner.run(cell, ctx.images.get(cell), outdir, attribute=tuple(kinds))
    record = ran.where()
    if not isinstance(record, dict):
        why = ran.ended.error or ("timed out" if ran.ended.timed_out
                                  else f"exit {ran.ended.exit_code}")
        raise AttributionFailed(f"{cell.id}: the attributed run left no where record ({why}; "
                                f"see {outdir / 'agent.log'})", ran.ended.timed_out)
    w = parse_where(record)
    if ran.ended.timed_out:
        # Only the host knows why the run stopped early: its deadline.
        said = f" (its deadline of {cell.settings.timeout:.0f} s ended the run)"
        w = dataclasses.replace(w, errors={
            k: v + said if "the run stopped at step" in v else v for k, v in w.errors.items()})
    if stopped := memory_stopped(ran.series):
        # The safety stop ended the attributed run too: what it left out says why.
        w = dataclasses.replace(w, errors={k: f"{v} ({stopped})" for k, v in w.errors.items()}
                                or ({"all": f"no call measured ({stopped})"} if not w.calls
                                    else {}))
    return w, record


def _took(res: CellResult) -> float | None:
    return res.timings.run_s or None


def _made(res: CellResult) -> int | None:
    """The calls the sweep's run of the cell measured (its end record), None unknown."""
    return res.end.iterations or res.summary.iterations or None


def attribute(ctx: Context, cell: Cell, res: CellResult, kinds: Sequence[str], outdir: Path,
              native: bool | None = None) -> tuple[Where, dict[str, JSON]] | None:
    """One cell's attributed run (None: it failed, said). A crash under tracemalloc runs
    again without it; memray's native stacks come from a second run where needed
    (`native` None: decide from this cell; else as its pair's bad cell did)."""
    room, why = stop_room(res) or (None, "")
    run_as = attributed(cell, kinds, _took(res), _made(res), room)
    ctx.progress(f"explain {cell.id}: running with --attribute {','.join(kinds)} "
                 f"({length(run_as)}{'; ' + why if why else ''})")
    try:
        w, record = run_attributed(ctx, run_as, kinds, outdir)
    except AttributionFailed as exc:
        ctx.progress(f"explain: {exc}")
        rest = tuple(k for k in kinds if k != "heap")
        if len(rest) == len(kinds) or not rest or ctx.cancel.is_set():
            return None
        # tracemalloc most often breaks a framework or the deadline: retry without it.
        ctx.progress(f"explain {cell.id}: running again without heap "
                     f"(--attribute {','.join(rest)})")
        try:
            w, record = run_attributed(ctx, attributed(cell, rest, _took(res), _made(res),
                                                       room), rest, outdir)
        except AttributionFailed as again:
            ctx.progress(f"explain: {again}")
            return None
        why = f"the run failed under tracemalloc ({exc}); run again without it"
        w = dataclasses.replace(w, errors={**w.errors, "heap": why}, kinds=(*w.kinds, "heap"))
    if native is None:
        native = needs_native(res, w) and "heap" in kinds
    if native and not ctx.cancel.is_set():
        w = _with_native(ctx, cell, res, w, outdir.with_name(outdir.name + ".native"))
    return w, record


def needs_native(res: CellResult, w: Where) -> bool:
    """The heap leaked (or grew to a plateau) more than Python's allocator saw."""
    heap, seen = res.memory.get("heap"), w.totals.get("heap")
    return (heap is not None and seen is not None and heap.kind in GREW
            and seen / max(w.calls, 1) < NATIVE_SHARE * heap.slope)


def with_memray(ctx: Context, cell: Cell, pins: str = "") -> Cell:
    """A local venv (`pip:`) gets memray beside its pins for the native run; any other
    image runs as it is. A dated image keeps its day's exact `pins`, since resolving
    again with memray could move them."""
    image = cell.image
    if not abilities(ctx.runtime_for(cell).name).adds_tools or not image.pip or any(
            p.split("=")[0].split("<")[0].split(">")[0].strip().lower() == "memray"
            for p in image.pip):
        return cell
    if image.as_of is not None:
        if not pins.split():
            return cell
        image = dataclasses.replace(image, pip=tuple(pins.split()), as_of=None)
    return dataclasses.replace(cell, image=dataclasses.replace(
        image, label=f"{image.label}+memray", pip=(*image.pip, MEMRAY)))


def _with_native(ctx: Context, cell: Cell, res: CellResult, w: Where, outdir: Path) -> Where:
    """`w` with memray's native sites from a second run (or why there are none)."""
    ctx.progress(f"explain {cell.id}: Python's allocator saw less than the heap grew; "
                 "running again with --attribute native (memray)")
    try:
        n, _ = run_attributed(ctx, attributed(with_memray(
            ctx, cell, res.image.labels.get("pins", "")), NATIVE, _took(res), _made(res)),
                              NATIVE, outdir)
    except AttributionFailed as exc:
        return dataclasses.replace(w, errors={**w.errors, "native": str(exc)},
                                   kinds=(*w.kinds, "native"))
    sites = dict(w.sites)
    totals = dict(w.totals)
    if "native" in n.sites:
        sites["native"] = n.sites["native"]
        totals["native"] = n.totals.get("native", 0)
    errors = {**w.errors, **{k: v for k, v in n.errors.items() if k == "native"}}
    return dataclasses.replace(w, sites=sites, totals=totals, errors=errors,
                               kinds=(*w.kinds, "native"))


# The memory source of the sweep's run whose floor a where record's part is named above.
PART_SOURCES = {"heap": "heap", "workers": WORKERS, "native": "heap", "device": "gpu"}


def floors(res: CellResult) -> dict[str, float]:
    """Part -> the smallest steady leak (bytes/call) the sweep's run could have missed."""
    out: dict[str, float] = {}
    for part, source in PART_SOURCES.items():
        trend = res.memory.get(source)
        missed = trend.missed if trend is not None else None
        if missed is not None and math.isfinite(missed):
            out[part] = missed
    return out


def explain(ctx: Context, results: Mapping[str, CellResult], cells: Mapping[str, Cell],
            todo: Sequence[Pair], root: Path) -> dict[str, Explanation]:
    """Attribute each pair's cells and write their where.json; cell id -> explanation.
    A failed pair is said and skipped."""
    out: dict[str, Explanation] = {}
    # The attributed runs' folder, marked as what it is: read through the sweep's report.
    ctx.store.write(f"{EXPLAIN_DIR}/{PLAN_FILE}",
                    plan_json(EXPLAIN, ctx.matrix.name, str(ctx.matrix.file)))
    for pair in todo:
        bad_res = results[pair.cell]
        kinds = kinds_for(bad_res)
        runs: dict[str, tuple[Where, dict[str, JSON]]] = {}
        native: bool | None = None      # the good cell as its bad one: same parts
        for cid in (pair.cell, pair.good):
            if cid is None or ctx.cancel.is_set():
                continue
            # An older explain's answer is not shown as this one's if this run fails.
            (root / "cells" / cid / WHERE_FILE).unlink(missing_ok=True)
            got = attribute(ctx, cells[cid], results[cid], kinds, root / EXPLAIN_DIR / cid,
                            native)
            if got is not None:
                runs[cid] = got
                native = "native" in got[0].kinds
            elif native is None:
                native = False
        if pair.cell not in runs:
            continue
        cell = cells[pair.cell]
        scenario, source = cell.scenario.script.name, source_of(cell)
        good_where = runs[pair.good][0] if pair.good in runs else None
        for cid, (w, record) in runs.items():
            res = results[cid]
            heap = res.memory.get("heap")
            lines = summary(w, scenario, source, floors=floors(res))
            said = notes(w, heap.slope if heap is not None else None)
            is_bad = cid == pair.cell
            good_label = results[pair.good].image.label if pair.good else ""
            # a regression that did not rise within its run is compared in shares
            between = bad_res.verdict == "regression" and not (
                bad_res.steps is not None and bad_res.steps.slowdown)
            found = (changes(good_where, w, scenario, source, floors=floors(res),
                             between=between)
                     if is_bad and (good_where is not None or pair.good is None) else [])
            fixed = pair.good is not None and image_after(results, pair.good, pair.cell)
            role = ("first bad" if is_bad and bad_res.verdict in BAD and pair.good
                    else ("fixed in" if fixed else "last good") if not is_bad else "cell")
            ex = Explanation(cid, role, pair.good if is_bad else pair.cell, w.kinds, w.calls,
                             tuple(lines), tuple(c.line(good_label, res.image.label)
                                                 for c in found),
                             tuple(said), dict(w.errors), record,
                             tuple(c.cells() for c in found),
                             (res.image.label, good_label) if found else ("", ""),
                             DerivedFrom.of(results, (pair.cell, pair.good)))
            ctx.store.write(f"cells/{cid}/{WHERE_FILE}", ex.to_json())
            out[cid] = ex
    return out


def explain_matrix(ctx: Context, matrix: Matrix, results: Mapping[str, CellResult],
                   todo: Sequence[Pair], root: Path) -> dict[str, Explanation]:
    """`explain` over the cells of `matrix` (the sweep's own).

    Raises:
        InputError: a cell to explain is not in the matrix (it changed since the sweep).
    """
    cells = {c.id: c for c in matrix.cells}
    gone = [cid for p in todo for cid in (p.cell, p.good) if cid and cid not in cells]
    if gone:
        raise InputError(f"cell {gone[0]} is not in matrix {matrix.file} (did it change "
                         "since the sweep?); pass --matrix with the sweep's own")
    return explain(ctx, results, cells, todo, root)


@dataclass(frozen=True)
class Explained:
    """What `explain_command` did: exit code, report model and the cells explained."""

    code: int
    report: Report | None = None
    cells: list[str] = field(default_factory=list)


def explain_command(root: Path, cell: str | None = None, matrix_file: Path | None = None,
                    runtime: str | None = None, docker_host: str | None = None,
                    quiet: bool = False) -> Explained:
    """Explain each row's first bad cell (only `cell`) against its last good, in `root`.

    Raises:
        InputError: see `chosen`; a directory whose matrix cannot be found.
        EnvironmentUnavailable: no engine to run the cells.
    """
    found, matrix = read_gated(root, matrix_file)
    readable = {**found.results, **found.was}
    todo = chosen(readable, cell, found.planned, found.unreadable)
    if cell is None and not todo and hidden_bad(readable, found):
        return Explained(EXIT_UNDECIDED)
    if not todo and (found.unreadable or found.missing):
        # An unread cell may be the bad one: never "no row has a bad cell"
        for cid, why in sorted(found.gaps.items()):
            if cid in found.unreadable or cid in found.missing:
                print(f"harness: {cid}: {why or 'not run'}", file=sys.stderr)
        print(f"  fix: {found.refresh} runs them again, then harness explain",
              file=sys.stderr)
        return Explained(EXIT_UNDECIDED)
    if not todo:
        answer.say("no row has a bad cell: nothing to explain")
        return Explained(EXIT_OK)
    if matrix is None:
        raise InputError(found.unchecked)
    engines = Engines.for_matrix(matrix, runtime or matrix.runtime, docker_host)
    todo = current(todo, found.results, matrix, engines, root, found)
    if not todo:
        print("harness: no pair left to explain: run the changed cells again first",
              file=sys.stderr)
        return Explained(EXIT_UNDECIDED)
    report, explained = explain_pairs(root, found, matrix, engines, todo, quiet)
    return Explained(EXIT_OK if explained else EXIT_ENVIRONMENT, report,
                     [p.cell for p in todo])


def chosen(results: dict[str, CellResult], cell: str | None,
           planned: Sequence[Planned] = (), unreadable: Collection[str] = ()) -> list[Pair]:
    if cell is not None and cell in unreadable:
        # Unreadable: what would be explained is not what the sweep decided.
        raise InputError(f"cell {cell!r} is unreadable here (its result.json is damaged "
                         "or cut short), so it is not explained; `harness report DIR` "
                         "names it and the command that runs it again")
    if cell is not None and cell not in results:
        near = difflib.get_close_matches(cell, list(results), n=1)
        raise InputError(f"no cell {cell!r} in this directory"
                         + (f"; did you mean {near[0]!r}?" if near else
                            f" (allowed values: {', '.join(sorted(results))})"))
    return pairs(results, cell, planned, unreadable)


def current(todo: list[Pair], results: dict[str, CellResult], matrix: Matrix,
            engines: Engines, where: Path, found: Gated | None = None) -> list[Pair]:
    """The pairs whose run keys still match, so the lines named are the verdict's; each
    pair left out is said, with why and the fix."""
    cells = {c.id: c for c in matrix.cells}
    runtimes = engines.by_host or {}
    keep = []
    for pair in todo:
        stale = found.not_current([c for c in (pair.cell, pair.good) if c]) if found else []
        for cid in (pair.cell, pair.good):
            if cid is None or cid not in cells or cid not in results:
                continue   # explain_matrix names a cell the matrix no longer has
            cell = as_recorded(cells[cid], results[cid])
            name = runtimes.get(cell.host.label, engines.default).name
            why = why_not_current(results[cid], cell, name)
            if why is not None:
                stale.append(f"{cid}: {why}")
        if stale:
            print(f"harness: not explained: {'; '.join(stale)}\n  fix: "
                  f"{refresh_line(where, matrix)} runs it again, then explain", file=sys.stderr)
        else:
            keep.append(pair)
    return keep


def hidden_bad(readable: dict[str, CellResult], found: Gated) -> bool:
    """Whether a row's bad cell is hidden behind an unread, stale or missing one (each
    said, with the rerun command), so it is never "no bad cell"."""
    hidden = unpaired(readable, found.planned, found.unreadable)
    for line in hidden:
        print(f"harness: {line}", file=sys.stderr)
    if hidden:
        print(f"  fix: {found.refresh} runs them again, then harness explain",
              file=sys.stderr)
    return bool(hidden)


def explain_pairs(root: Path, found: Gated, matrix: Matrix, engines: Engines,
                  todo: list[Pair], quiet: bool) -> tuple[Report, bool]:
    """Run the pairs with attribution and rewrite the reports (not if partial): the
    report model, and whether any run left a where record."""
    wanted = {cid for p in todo for cid in (p.cell, p.good) if cid}
    engines.start([c for c in matrix.cells if c.id in wanted])
    with interruptible():
        store = RunStore(root)
        try:
            store.lock()
        except StoreError as exc:
            raise without_out(exc, "wait for it to finish, then run the same command "
                                   "again") from exc
        with engines.stopped(store.unlock):
            sweep = Sweep(matrix, engines.default, store, printer(quiet), engines.by_host)
            explained = explain_matrix(sweep.ctx, matrix, found.results, todo, root)
            meta = load_json_keys(root / "results.json", ("meta",)).get("meta")
            report = Report.from_results(matrix.name, found.results,
                                         meta if isinstance(meta, dict) else None, root,
                                         planned=found.plan, unreadable=found.gaps,
                                         outdated=found.stale)
            if not report.missing_cells:   # a partial report never replaces a whole one
                write_all(store, report)
    return report, bool(explained)
