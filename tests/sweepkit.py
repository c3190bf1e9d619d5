"""One way to write a sweep test: a matrix of these images and scenarios over the
deterministic runtime (tests/fakeruntime.py), swept, with its directory.

    run = sweepkit.swept(tmp_path, ["v1", "v2"], {"v2": Behaviour(leak_per_iter=16384)})
    assert run.results["v2.gpu0.loop"].verdict == "leak"
    main(["report", str(run.root)])

`tests/conftest.py` binds it to a test's `tmp_path` as the `fake_sweep` fixture; a
module-scoped fixture calls it with `tmp_path_factory.mktemp(...)`. The parts stand
alone too: `write_matrix` (the directory: m.yaml and its scenario files) and
`sweep_matrix` (one sweep of a matrix file into a locked, then released, store).
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from fakeruntime import Behaviour, FakeRuntime

from harness import matrixfile
from harness.matrixfile.model import Cell, Matrix
from harness.report import Report, write_all
from harness.result.codec import encode
from harness.result.model import CellResult, Plan
from harness.runtimes.base import Runtime
from harness.stages.orchestrator import SweepOutcome, sweep
from harness.store import RunStore
from harness.store.results import PLAN_FILE
from harness.sweeping.course import plan_of

# A scenario that allocates nothing: what the fake runtime's behaviour makes of a cell is
# the whole truth.
LOOP = "def setup(params):\n    return None\n\n\ndef step(state):\n    pass\n"
# Long enough for a verdict, with no confirmation repeats: the fake's numbers decide.
DEFAULTS: Mapping[str, Any] = {"iterations": 300, "warmup": 10, "sample_every": 5,
                               "repeats": 0}
# How a cell behaves: one Behaviour for all, a table by image label (others clean), a
# function of the cell, or a FakeRuntime (or subclass) already made.
Behave = Behaviour | Mapping[str, Behaviour] | Callable[[Cell], Behaviour] | Runtime | None


def runtime_of(behave: Behave) -> Runtime:
    """The runtime that `behave` describes (see `Behave`): a FakeRuntime unless given."""
    if behave is None:
        return FakeRuntime(lambda c: Behaviour())
    if isinstance(behave, Behaviour):
        same = behave
        return FakeRuntime(lambda c: same)
    if isinstance(behave, Mapping):
        table = dict(behave)
        return FakeRuntime(lambda c: table.get(c.image.label, Behaviour()))
    if hasattr(behave, "run"):
        return behave   # a runtime already
    return FakeRuntime(behave)


def on_the_cli(monkeypatch: Any, behave: Behave) -> list[Runtime]:
    """`harness.cli.main` runs its cells on the fake runtime `behave` describes: each
    runtime a command asks `runtimes.get_runtime` for is made anew. Returns them in the
    order made."""
    made: list[Runtime] = []

    def get_runtime(name: str, docker_host: str | None = None) -> Runtime:
        made.append(runtime_of(behave))
        return made[-1]

    monkeypatch.setattr("harness.runtimes.get_runtime", get_runtime)
    return made


def write_matrix(where: Path, images: Iterable[str | Mapping[str, Any]],
                 scenarios: Iterable[str | Mapping[str, Any]] = ("loop.py",), *,
                 name: str = "t", gpus: Iterable[Any] | None = (0,),
                 defaults: Mapping[str, Any] | None = DEFAULTS, runtime: str = "local",
                 files: Mapping[str, str] | None = None, file: str = "m.yaml",
                 **top: Any) -> Path:
    """Write `where/m.yaml` and the scenario files it names; return the matrix's path.

    An image given as a string is `{name: ...}` under `runtime: local` (a label the fake
    runtime runs) and an image reference under any other runtime; a scenario given as a
    string is its script's file name; a mapping is written as it is. `gpus=None` leaves
    the gpu axis out; `defaults=None` leaves the defaults out. Scripts named, not in
    `files` and not there already get `LOOP`. `top` adds top-level keys (e.g.
    `hosts=[...]`) after the matrix.
    """
    where.mkdir(parents=True, exist_ok=True)
    axes: dict[str, Any] = {"image": [
        dict(i) if not isinstance(i, str) else {"name": i} if runtime == "local" else i
        for i in images]}
    if gpus is not None:
        axes["gpu"] = list(gpus)
    axes["scenario"] = [s if isinstance(s, str) else dict(s) for s in scenarios]
    doc: dict[str, Any] = {"name": name}
    if runtime:
        doc["runtime"] = runtime
    if defaults is not None:
        doc["defaults"] = dict(defaults)
    doc["matrix"] = axes
    doc.update(top)
    texts = dict(files or {})
    for s in axes["scenario"]:
        script = s if isinstance(s, str) else s.get("script")
        if isinstance(script, str) and script.endswith(".py") and not (where / script).exists():
            texts.setdefault(script, LOOP)
    for rel, text in texts.items():
        (where / rel).parent.mkdir(parents=True, exist_ok=True)
        (where / rel).write_text(text)
    path = where / file
    path.write_text(yaml.safe_dump(doc, sort_keys=False, default_flow_style=None))
    return path


@dataclass
class Swept:
    """A finished sweep: its matrix file, the store (unlocked) and what the sweep said."""

    path: Path                  # the matrix file; its directory holds the scenarios
    matrix: Matrix
    cells: list[Cell]
    store: RunStore
    outcome: SweepOutcome
    runtime: Runtime
    said: list[str]             # the sweep's progress lines

    @property
    def root(self) -> Path:
        """The run directory (cells/, reports)."""
        return self.store.root

    @property
    def results(self) -> dict[str, CellResult]:
        return self.outcome.results

    def report(self, meta: Mapping[str, Any] | None = None, planned: bool = True) -> Report:
        """The report model of this sweep, as the CLI builds it after a sweep (`planned`:
        checked against the cells it ran, as plan.json does)."""
        return Report.from_results(self.matrix.name, self.results, meta, self.root,
                                   planned=plan_of(self.cells) if planned else ())


# The `fake_sweep` fixture: `swept` with its first argument bound to the test's tmp_path.
FakeSweep = Callable[..., Swept]


def sweep_matrix(path: Path | Matrix, behave: Behave = None, *, out: Path | None = None,
                 cells: Callable[[list[Cell]], list[Cell]] | None = None,
                 plan: bool = False, report: bool = False,
                 meta: Mapping[str, Any] | None = None,
                 then: Callable[[RunStore, SweepOutcome], None] | None = None,
                 runtimes: dict[str, Runtime] | None = None, resume: bool = False,
                 progress: Callable[[str], None] | None = None) -> Swept:
    """Sweep the matrix at `path` (or the one loaded) over the fake runtime into a new
    store under `out` (default: `reports/` beside the matrix), holding the store's lock
    throughout; with `resume`, into the newest sweep there, as `--resume` does.

    `cells` picks the cells to run (default all); `plan` writes matrix.yaml and
    plan.json first, as `harness sweep` does; `report` writes every report after (with
    `meta`, and checked against the plan when there is one); `then` runs last, still
    under the lock. `runtimes` maps a matrix's host names to their runtimes, as `harness
    sweep` builds them for `hosts:`. The sweep's progress lines are kept in
    `Swept.said` and also given to `progress`.
    """
    if isinstance(path, Matrix):
        matrix, path = path, path.file
    else:
        matrix = matrixfile.load(path)
    chosen = list(matrix.cells)
    if cells is not None:
        chosen = cells(chosen)
    runtime = runtime_of(behave)
    said: list[str] = []

    def say(line: str) -> None:
        said.append(line)
        if progress is not None:
            progress(line)

    store = RunStore.open(out if out is not None else path.parent / "reports", matrix.name,
                          resume)
    try:
        if plan:
            store.write("matrix.yaml", path.read_text())
            store.write(PLAN_FILE, encode(Plan(plan_of(chosen), str(path))))
        outcome = sweep(matrix, chosen, runtime, store, say, resume, runtimes)
        done = Swept(path, matrix, chosen, store, outcome, runtime, said)
        if report:
            write_all(store, done.report(meta, planned=plan))
        if then is not None:
            then(store, outcome)
    finally:
        store.unlock()
    return done


def swept(where: Path, images: Iterable[str | Mapping[str, Any]], behave: Behave = None,
          scenarios: Iterable[str | Mapping[str, Any]] = ("loop.py",), *,
          out: Path | None = None, cells: Callable[[list[Cell]], list[Cell]] | None = None,
          plan: bool = False, report: bool = False, meta: Mapping[str, Any] | None = None,
          then: Callable[[RunStore, SweepOutcome], None] | None = None,
          **matrix: Any) -> Swept:
    """`write_matrix(where, images, scenarios, **matrix)` then `sweep_matrix` of it."""
    path = write_matrix(where, images, scenarios, **matrix)
    return sweep_matrix(path, behave, out=out, cells=cells, plan=plan, report=report,
                        meta=meta, then=then)


def wheel(where: Path, name: str, version: str, code: str = "", requires: str = "") -> None:
    """Write a wheel of one module `name` (its source `code`) into `where`, installable
    with no index; `requires` is its one Requires-Dist line, if any."""
    info = f"{name}-{version}.dist-info"
    files = {f"{name}.py": code,
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                 + (f"Requires-Dist: {requires}\n" if requires else ""),
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{n},,\n" for n in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(where / f"{name}-{version}-py3-none-any.whl", "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
