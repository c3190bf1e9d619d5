"""Results directories by kind: which command made a directory, when, and which reads it.
Every command records its kind and start time in plan.json. "The newest run" is the newest
finished one of the kinds a command reads, by recorded time (not name order); a command
refuses a directory of a kind it does not read (`require`). Older directories without a
kind are told by what they hold."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from harness.errors import InputError
from harness.result.codec import JSON, encode, parse
from harness.result.model import Plan, Planned
from harness.store.resultsjson import Stamp, stamp_of

PLAN_FILE = "plan.json"     # what made the directory; a sweep's cells, written before the first

SWEEP, BISECT, FIT, EXPLAIN, REANALYZED = "sweep", "bisect", "fit", "explain", "reanalyzed"
KINDS = (SWEEP, BISECT, FIT, EXPLAIN, REANALYZED)
SWEEP_RESULTS = (SWEEP, REANALYZED)     # a sweep's cells: report, explain, compare read them

READ_BY = {
    SWEEP: "harness report, harness explain or harness compare",
    REANALYZED: "harness report, harness explain or harness compare",
    BISECT: "harness bisect (run it again: it reuses these cells and prints the answer)",
    FIT: "harness compare (its fit.md holds the answer; harness fit reuses its probes)",
    EXPLAIN: "harness report on the sweep directory it is in",
}


def plan_json(kind: str, name: str, matrix: str, cells: Sequence[Planned] = (),
              started: float | None = None, resumed: float | None = None) -> JSON:
    """plan.json's content: kind, start and resume times, matrix, planned cells."""
    assert kind in KINDS, kind
    return encode(Plan(tuple(cells), matrix, kind=kind,
                       started=time.time() if started is None else started, name=name,
                       resumed=resumed))


# plan.json as last parsed, by path, with its stamp: commands ask many times and plans can
# be large. A file written in the last second is not kept (a rewrite could keep its stamp).
_PLANS: dict[Path, tuple[Stamp, JSON]] = {}
_PLANS_KEPT = 4
_SETTLED_NS = 1_000_000_000


def _plan(root: Path) -> JSON:
    """plan.json's content (shared: do not change it), reparsed only when changed, or None."""
    path = root / PLAN_FILE
    try:
        with path.open("rb") as f:
            st = os.fstat(f.fileno())
            known = _PLANS.get(path)
            if known is not None and known[0] == stamp_of(st):
                return known[1]
            data = parse(f.read())
    except (OSError, ValueError):
        return None
    if st.st_mtime_ns < time.time_ns() - _SETTLED_NS:
        if len(_PLANS) >= _PLANS_KEPT:
            _PLANS.clear()
        _PLANS[path] = (stamp_of(st), data)
    return data


def kind_of(root: Path) -> str | None:
    """The directory's kind; None when it is not a results directory."""
    if not root.is_dir():
        return None
    data = _plan(root)
    if isinstance(data, dict):
        kind = data.get("kind")
        return kind if isinstance(kind, str) and kind in KINDS else SWEEP
    if (root / PLAN_FILE).exists():
        return SWEEP        # unreadable: `harness report` says what is wrong with it
    if (root / "fit.json").is_file():
        return FIT
    if not (root / "cells").is_dir():
        return None          # `reports/<name>` (a matrix may be named fit-...), a checkout
    if root.name.startswith("fit-"):
        return FIT
    if root.name.startswith("bisect-"):
        return BISECT
    return REANALYZED if "-reanalyzed" in root.name else SWEEP


def started_of(root: Path) -> float:
    """When the directory's command last started (`--resume` included): what orders runs."""
    data = _plan(root)
    times = [v for v in (data.get(k) for k in ("started", "resumed"))
             if isinstance(v, (int, float)) and not isinstance(v, bool)] \
        if isinstance(data, dict) else []
    if times:
        return float(max(times))
    return begun_of(root)


def begun_of(root: Path) -> float:
    """When the directory's run first started, as its name says it."""
    data = _plan(root)
    started = data.get("started") if isinstance(data, dict) else None
    if isinstance(started, (int, float)) and not isinstance(started, bool):
        return float(started)
    for path in (root / PLAN_FILE, root / "results.json", root):
        try:
            return path.stat().st_mtime
        except OSError:
            continue
    return 0.0


def name_of(root: Path) -> str:
    """The matrix name the plan.json records ("" when none)."""
    data = _plan(root)
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) else ""


def finished(root: Path) -> bool:
    """Whether the directory holds a finished cell or a fit's answer (else it is debris)."""
    cells = root / "cells"
    return ((cells.is_dir() and any(cells.glob("*/result.json")))
            or (root / "fit.json").is_file())


def runs_of(base: Path, kinds: Collection[str], name: str = "") -> list[Path]:
    """The directories under `base` of one of `kinds` (and matrix `name`), finished or not."""
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if kind_of(p) in kinds
                  and not (name and name_of(p) and name_of(p) != name))


def newest(base: Path, kinds: Collection[str], name: str = "",
           keep: Callable[[Path], bool] | None = None) -> Path | None:
    """The newest finished directory of one of `kinds` (and matrix `name`) under `base`."""
    found = [p for p in runs_of(base, kinds, name)
             if finished(p) and (keep is None or keep(p))]

    def when(p: Path) -> tuple[float, str]:
        return started_of(p), p.name

    return max(found, key=when) if found else None


def made_from(root: Path, matrix: Path | None) -> bool:
    """Whether the run was made from the matrix file `matrix` (older runs: by name)."""
    named = matrix_named(root)
    if matrix is None or not named:
        return True
    return Path(named).resolve() == matrix.resolve()


def resumable(base: Path, name: str, matrix: Path | None) -> Path | None:
    """The newest sweep under `base` of the matrix file `matrix`: what `--resume` continues."""
    return newest(base, (SWEEP,), name, lambda p: made_from(p, matrix))


def other_matrix(run: Path, matrix: Path, out: Path) -> InputError:
    """The error for --resume finding a sweep of another matrix file of the same name."""
    where = "" if out.resolve() == Path("reports").resolve() else f" --out {shown(out)}"
    other = matrix_named(run)
    return InputError(
        f"--resume: {shown(run)} is a run of {other}, not of {shown(matrix)} (the two "
        f"files share the name {name_of(run) or run.parent.name!r}); --resume continues "
        "a run of the same matrix file\n  fix: `harness sweep "
        f"{shown(matrix)}{where}` starts a new run (or `harness sweep {other} --resume "
        f"{shown(run)}` continues that one)")


def require(root: Path, kinds: Collection[str], command: str, flag: str = "") -> str:
    """The directory's kind, when `command` reads it.

    Raises:
        InputError: not a results directory, or of a kind `command` does not read (names the
            command that does); `flag` is the option that named it.
    """
    kind = kind_of(root)
    wanted = " or ".join(kinds)
    where = f"{flag} {root}" if flag else str(root)
    if kind is None:
        inside = newest(root, kinds) if root.is_dir() else None
        fix = (f"\n  fix: pass one of the runs it holds, the newest: {inside}"
               if inside is not None else "")
        raise InputError(f"{where}: not a results directory (no plan.json or cells/ here); "
                         f"{command} reads a {wanted} directory (reports/<name>/<timestamp>)"
                         f"{fix}")
    if kind not in kinds:
        raise InputError(f"{where}: a {kind} directory, which {command} does not read (it "
                         f"reads a {wanted} directory); read it with {READ_BY[kind]}")
    return kind


def matrix_file(root: Path, named: str = "") -> Path | None:
    """The matrix file the run recorded, found from here or above `root`; None if not."""
    named = named or matrix_named(root)
    if not named:
        return None
    path = Path(named)
    if path.is_file():
        return path
    if not path.is_absolute():
        for above in root.resolve().parents:
            if (above / path).is_file():
                return above / path
    return None


def matrix_named(root: Path) -> str:
    data = _plan(root)
    matrix = data.get("matrix") if isinstance(data, dict) else None
    return matrix if isinstance(matrix, str) else ""


def shown(path: Path) -> Path:
    """`path` relative to the working directory when below it, else absolute."""
    full = path.resolve()
    try:
        return full.relative_to(Path.cwd().resolve())
    except ValueError:
        return full


def sweep_again(run: Path) -> str:
    """The command that sweeps `run`'s matrix again into `run`'s folder."""
    matrix = matrix_file(run)
    line = f"harness sweep {shown(matrix) if matrix else 'MATRIX'}"
    out = run.resolve().parent.parent
    if out != Path("reports").resolve():
        line += f" --out {shown(out)}"
    return line


def resume_copy(run: Path) -> str:
    """The commands that copy the unwritable `run` here and resume the copy."""
    copy = f"{run.parent.name}-{run.name}"
    matrix = matrix_file(run)
    return (f"cp -r {shown(run)} {copy} && harness sweep "
            f"{shown(matrix) if matrix else 'MATRIX'} --resume {copy}")
