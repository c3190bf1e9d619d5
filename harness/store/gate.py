"""The one gate every answer reads its cells through: a run's cells, each checked against
the inputs as they are now. `read_run(root)` is what a results directory holds; `gate`
adds each planned cell's state: current, stale (`why_changed`), missing or unreadable. A
command answers only from current cells and names the others with the command that
refreshes them (`Gated.refresh`); without the run's matrix, cells read as recorded, said
so (`Gated.unchecked`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness import matrixfile
from harness.errors import InputError, SpecError
from harness.matrixfile import parse
from harness.matrixfile.load import load_copy
from harness.result.codec import DecodeError, decode
from harness.result.model import CellResult, Plan, Planned
from harness.result.runkey import BEFORE_KEYS, Memo, key_of, why_changed
from harness.store.results import PLAN_FILE, load_json, read_cells
from harness.store.resultsjson import Stamp
from harness.store.runs import SWEEP, kind_of, matrix_file, matrix_named, shown, sweep_again

if TYPE_CHECKING:
    from harness.matrixfile.model import Cell, Matrix

CURRENT, STALE, MISSING, UNREADABLE = "current", "stale", "missing", "unreadable"
LENGTHS = ("iterations", "warmup", "max_iterations", "min_iterations", "budget")


@dataclass(frozen=True)
class RunDir:
    """What a results directory holds: readable results, unreadable cells (why), the plan."""

    results: dict[str, CellResult]
    unreadable: dict[str, str]
    planned: tuple[Planned, ...] = ()
    has_plan: bool = False
    matrix: str = ""             # the matrix file the sweep ran, as plan.json says
    # Where `planned` came from: plan.json, else (older sweeps) results.json or matrix.yaml.
    plan_from: str = ""
    # Stamps of result.json files in this harness's schema: results.json copies them
    # rather than encoding every cell again.
    stored: dict[str, Stamp] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class Gated(RunDir):
    """A run's cells as the gate reads them: `results` current only; `stale` (id -> what
    changed, kept in `was`); `unreadable`; and the missing."""

    stale: dict[str, str] = dataclasses.field(default_factory=dict)
    was: dict[str, CellResult] = dataclasses.field(default_factory=dict)
    refresh: str = ""            # the command that runs every non-current cell again
    unchecked: str = ""          # why the cells could not be checked against the matrix

    def state(self, cid: str) -> str:
        if cid in self.results:
            return CURRENT
        if cid in self.stale:
            return STALE
        return UNREADABLE if cid in self.unreadable else MISSING

    @property
    def missing(self) -> list[str]:
        """Planned cells that never finished (not stale, not unreadable)."""
        return sorted(p.id for p in self.planned if self.state(p.id) == MISSING)

    @property
    def gaps(self) -> dict[str, str]:
        """Every planned cell not current, with why: a gap, never a finding."""
        out = {cid: f"stale: {why}; `{self.refresh}` runs it again"
               for cid, why in self.stale.items()}
        out.update(self.unreadable)
        return out

    @property
    def plan(self) -> tuple[Planned, ...]:
        """The plan, with each stale cell in it, so no first bad is named across one."""
        have = {p.id for p in self.planned}
        extra = tuple(Planned(r.id, r.row, r.image.label, r.image.index)
                      for cid, r in sorted(self.was.items()) if cid not in have)
        return self.planned + extra

    def not_current(self, ids: list[str]) -> list[str]:
        """Of `ids`, each that is not current, with its state and why."""
        out = []
        for cid in ids:
            state = self.state(cid)
            if state == STALE:
                out.append(f"{cid}: {self.stale[cid]}")
            elif state == UNREADABLE:
                out.append(f"{cid}: unreadable ({self.unreadable[cid]})")
            elif state == MISSING:
                out.append(f"{cid}: not run")
        return out


def read_run(root: Path) -> RunDir:
    """Everything on disk `harness report` needs, unchecked against the matrix (`gate`).

    Raises:
        InputError: a result.json or plan.json of the wrong shape (names the file and key).
    """
    read = read_cells(root, "\n  fix: re-run that cell: delete its result.json, then "
                            f"{rerun_line(root)}")
    results, unreadable, stored = read.results, read.unreadable, read.stored
    plan = root / PLAN_FILE
    if not plan.is_file():
        for source, cells in (("results.json", planned_by_results(root)),
                              ("matrix.yaml", planned_by_matrix(root))):
            if cells:
                return RunDir(results, unreadable, cells, True, plan_from=source,
                              stored=stored)
        return RunDir(results, unreadable, stored=stored)
    try:
        found = decode(Plan, load_json(plan), "plan", parsed=True)
    except DecodeError as exc:
        raise InputError(f"{plan}: {exc}\n  fix: delete it to report the cells there "
                         "are without checking for missing ones") from exc
    # A cell on disk that the plan does not name is not this run's.
    ids = {p.id for p in found.cells}
    if ids:
        results = {k: v for k, v in results.items() if k in ids}
        unreadable = {k: v for k, v in unreadable.items() if k in ids}
        stored = {k: v for k, v in stored.items() if k in ids}
    return RunDir(results, unreadable, found.cells, True, found.matrix, PLAN_FILE, stored)


def gate(root: Path, given: Path | None = None,
         runtime: Callable[[Cell], str] | None = None,
         matrix: Matrix | None = None) -> Gated:
    """Each of the run's cells as it stands now, checked against `given` (else the run's copy).
    `runtime`: where a cell would run now; without it, where it ran (no run keys: current).

    Raises: InputError: a result.json or plan.json of the wrong shape; a `given` unreadable.
    """
    found = read_run(root)
    refresh = rerun_line(root)
    if matrix is None:
        try:
            matrix = matrix_of(root, found.matrix, given)
        except InputError as exc:
            if given is not None:
                raise
            return _gated(found, found.results, {}, refresh, str(exc))

    cells = {c.id: c for c in matrix.cells}
    stale: dict[str, str] = {}
    hashed: dict[Path, str] = {}     # each scenario read once in this look
    memo: Memo = {}                  # and its params and settings made once
    for cid, res in found.results.items():
        cell = cells.get(cid)
        if cell is None:
            stale[cid] = f"the matrix {matrix.file} has no cell {cid} now"
            continue
        cell = as_recorded(cell, res)
        if res.key is None:
            if runtime is not None:
                stale[cid] = BEFORE_KEYS
            continue
        if runtime is None:
            now = dataclasses.replace(key_of(cell, res.key.runtime, res.key.attribution,
                                             hashed, memo),
                                      host=res.key.host)
        else:
            now = dataclasses.replace(key_of(cell, runtime(cell), hashed=hashed, memo=memo),
                                      attribution=res.key.attribution)
        why = why_changed(res.key, now)
        if why is not None:
            stale[cid] = why
    return _gated(found, found.results, stale, refresh_line(root, matrix))


def why_not_current(result: CellResult | None, cell: Cell, runtime: str) -> str | None:
    """Why a recorded result does not answer for `cell` on `runtime` now, or None:
    the one reuse check of every command."""
    if result is None:
        return "not run"
    return why_changed(result.key, key_of(cell, runtime))


def read_gated(root: Path, given: Path | None = None, as_run: bool = False
               ) -> tuple[Gated, Matrix | None]:
    """The run's cells through the gate, and the matrix checked against (None where not
    found: `Gated.unchecked`); `as_run`: the matrix as the run recorded it.

    Raises: InputError: a --matrix that does not read; a result.json or plan.json of wrong shape.
    """
    try:
        matrix = matrix_of(root, "", given, as_run)
    except InputError:
        if given is not None:
            raise
        return gate(root), None
    return gate(root, matrix=matrix), matrix


def _gated(found: RunDir, readable: dict[str, CellResult], stale: dict[str, str],
           refresh: str, unchecked: str = "") -> Gated:
    return Gated(
        {k: v for k, v in readable.items() if k not in stale}, found.unreadable,
        found.planned, found.has_plan, found.matrix, found.plan_from,
        {k: v for k, v in found.stored.items() if k not in stale}, stale,
        {k: v for k, v in readable.items() if k in stale}, refresh, unchecked)


def as_recorded(cell: Cell, result: CellResult) -> Cell:
    """The cell with the run's length as recorded: --iterations is no changed setting."""
    recorded = {k: result.settings.get(k) for k in LENGTHS}
    s = cell.settings
    now: dict[str, object] = {"iterations": s.iterations, "warmup": s.warmup,
                              "max_iterations": s.max_iterations,
                              "min_iterations": s.min_iterations, "budget": s.budget}
    kept: dict[str, int | float | None] = {
        k: v for k, v in recorded.items()
        if k in result.settings and (v is None or isinstance(v, int | float))
        and v != now[k]}
    if not kept:
        return cell
    # The lengths are ints or None in RunSettings; mypy reads **kept against every field.
    settings = dataclasses.replace(cell.settings, **kept)  # type: ignore[arg-type]
    return cell.with_settings(settings)


def matrix_of(root: Path, named: str, given: Path | None, as_run: bool = False) -> Matrix:
    """The matrix the cells are judged against: `given`, else the file the run was swept
    from as it reads now (edits make cells stale); `as_run`: the run's own copy.

    Raises:
        InputError: neither can be found.
    """
    if given is not None:
        if not given.is_file():
            raise InputError(f"--matrix {given}: no such file")
        return matrixfile.load(given)
    original = matrix_file(root, named)
    named = named or matrix_named(root)
    if original is None and not named:
        raise InputError(f"{root}: its plan.json names no matrix file; pass --matrix FILE "
                         "(the matrix the sweep ran)")
    if original is None:
        raise InputError(f"{root}: the sweep's matrix {named} is not there, from here or "
                         f"from a directory above the run; pass --matrix FILE")
    copy = root / "matrix.yaml"
    return load_copy(copy, original) if as_run and copy.is_file() else matrixfile.load(original)


def refresh_line(root: Path, matrix: Matrix) -> str:
    """The command that reruns a run's changed cells (resume, or a new sweep)."""
    if kind_of(root) == SWEEP:
        return f"harness sweep {shown(matrix.file)} --resume {shown(root)}"
    return sweep_again(root)     # a new run beside it, where its reader finds it


def rerun_line(root: Path) -> str:
    """The command that reruns a sweep's unreadable or missing cells into `root`."""
    found = matrix_file(root)
    matrix = shown(found) if found is not None else "MATRIX"
    if kind_of(root) != SWEEP:
        return sweep_again(root)     # a new run beside it, where its reader finds it
    return f"harness sweep {matrix} --resume {shown(root)}"


def kept_plan(root: Path, matrix: Matrix, planned: tuple[Planned, ...]
              ) -> tuple[Planned, ...]:
    """A resumed run's plan: the cells it runs now plus its old ones the matrix still has."""
    try:
        before = decode(Plan, load_json(root / PLAN_FILE), "plan", parsed=True).cells
    except DecodeError:
        return planned
    have = {p.id for p in planned}
    ids = {c.id for c in matrix.cells}
    return planned + tuple(p for p in before if p.id in ids and p.id not in have)


def planned_by_results(root: Path) -> tuple[Planned, ...]:
    """The cells an older sweep's results.json lists (written at its end)."""
    data = load_json(root / "results.json")
    cells = data.get("cells") if isinstance(data, dict) else None
    out: list[Planned] = []
    for cid, cell in sorted(cells.items()) if isinstance(cells, dict) else ():
        image = cell.get("image") if isinstance(cell, dict) else None
        row = cell.get("row") if isinstance(cell, dict) else None
        label = image.get("label") if isinstance(image, dict) else None
        index = image.get("index") if isinstance(image, dict) else None
        if not (isinstance(row, str) and isinstance(label, str) and isinstance(index, int)):
            return ()     # not a results.json this harness wrote: no plan from it
        out.append(Planned(cid, row, label, index))
    return tuple(out)


def planned_by_matrix(root: Path) -> tuple[Planned, ...]:
    """Every cell of the directory's matrix copy; none when it does not read."""
    path = root / "matrix.yaml"
    try:
        matrix = parse(path.read_text(encoding="utf-8"), path, check_files=False)
    except (OSError, UnicodeDecodeError, SpecError):
        return ()
    return tuple(Planned(c.id, c.row, c.image.label, c.image.index) for c in matrix.cells)
