"""New tags of a repository, run through a suite against a baseline tag.

list tags (harness.watch.registry) -> the tags newer than the last one checked -> a matrix
(the suite's, with `matrix.image` = [baseline, new...] and `baseline:` set) -> sweep ->
reports -> the state file moves on to the newest tag run.

Which tags are "newer" than the baseline (and the last tag checked): those
`harness.matrixfile.releases.tag_order` compares with it (NGC calendar tags with the
baseline's suffix by (YY, MM, P); anything else as a version of the same shape), and
later than it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import matrixfile
from harness.analysis.kinds import BAD
from harness.errors import InputError, SpecError
from harness.matrixfile.model import DEFAULT_RUNTIME, RUNTIMES, Cell, Matrix, abilities
from harness.matrixfile.releases import tag_order as tag_order
from harness.matrixfile.yamlsrc import Located, dump_text, load_text, read_text
from harness.report import Report, write_all
from harness.runtimes.base import Runtime
from harness.store.results import RunStore, atomic_write_text
from harness.sweeping.orchestrator import Sweep, SweepOutcome
from harness.watch.registry import RepoRef

STATE_SCHEMA = 1


def newer_tags(tags: Iterable[str], baseline: str, last: str | None = None) -> list[str]:
    """Tags after `baseline` and after `last` (when comparable), oldest first."""
    key = tag_order(baseline)
    start = key(baseline)
    assert start is not None
    last_key = key(last) if last is not None else None
    if last_key is not None and last_key > start:
        start = last_key
    found = {t: k for t in set(tags) if (k := key(t)) is not None and k > start}
    return sorted(found, key=lambda t: (found[t], t))


@dataclass(frozen=True)
class Plan:
    """What one check runs: the baseline and the new tags of a repository."""

    repo: RepoRef
    baseline: str
    last: str | None            # the newest tag an earlier check ran (the state)
    tags: tuple[str, ...]       # every tag the registry listed
    new: tuple[str, ...]        # oldest first

    @property
    def images(self) -> list[str]:
        return [self.repo.image(t) for t in (self.baseline, *self.new)]


def make_plan(repo: RepoRef, baseline: str, tags: list[str], last: str | None) -> Plan:
    """The tags to run.

    Raises:
        InputError: the baseline tag is not in the registry.
    """
    if baseline not in tags:
        comparable = [t for t in tags if tag_order(baseline)(t) is not None]
        nearby = sorted(comparable or tags)[-8:]
        raise InputError(f"--baseline {baseline}: {repo.written} has no such tag ({len(tags)} "
                         f"tags listed)\n  fix: pick an existing tag, e.g. "
                         f"{', '.join(nearby) or '(the repository has no tags)'}")
    return Plan(repo, baseline, last, tuple(tags), tuple(newer_tags(tags, baseline, last)))


@dataclass
class WatchState:
    """The last tag checked per repository, in a JSON file written atomically."""

    path: Path
    repos: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> WatchState:
        """The state at `path`; none yet when the file is missing.

        Raises:
            InputError: the file exists but is not a watch state.
        """
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls(path)
        except (OSError, ValueError) as exc:
            raise InputError(f"--state {path}: cannot read a watch state ({exc})\n  fix: "
                             "delete the file to start from the baseline, or pass another "
                             "--state") from exc
        if not isinstance(data, dict) or data.get("schema") != STATE_SCHEMA or not isinstance(
                data.get("repos"), dict):
            raise InputError(f"--state {path}: not a harness watch state (schema "
                             f"{STATE_SCHEMA})\n  fix: delete it or pass another --state")
        return cls(path, data["repos"])

    def last(self, repo: str) -> str | None:
        tag = self.repos.get(repo, {}).get("last")
        return tag if isinstance(tag, str) else None

    def record(self, plan: Plan, results: Path, bad: list[str]) -> None:
        """Remember the newest tag run and save.

        Raises:
            StoreError: the state file cannot be written.
        """
        self.repos[plan.repo.written] = {
            "last": plan.new[-1], "baseline": plan.baseline, "checked": list(plan.new),
            "bad": bad, "results": str(results), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        atomic_write_text(self.path, json.dumps({"schema": STATE_SCHEMA, "repos": self.repos},
                                                indent=1, sort_keys=True) + "\n")


def suite_name(file: Path) -> str:
    """The suite's `name:` (where its results go), without validating the rest.

    Raises:
        SpecError: the file cannot be read or is not YAML.
    """
    data = _read_suite(file).data
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) and name else file.stem


def suite_matrix(file: Path, plan: Plan) -> tuple[Matrix, str]:
    """The suite with `matrix.image` = the plan's images and the baseline set, validated
    by the same code as any matrix; also that matrix as YAML text (kept with the results).

    Raises:
        SpecError: the suite is wrong; lines refer to `file`.
    """
    doc = _read_suite(file)
    if not isinstance(doc.data, dict) or not isinstance(doc.data.get("matrix"), dict):
        matrixfile.parse_located(doc, file)  # says what is wrong, with the line
        raise SpecError(str(file), "matrix", doc.line(("matrix",)), "must be a mapping")
    runtime = doc.data.get("runtime", DEFAULT_RUNTIME)
    if not isinstance(runtime, str) or not abilities(runtime).pulls_images:
        pulls = ", ".join(f"`runtime: {n}`" for n in RUNTIMES if abilities(n).pulls_images)
        raise SpecError(str(file), "runtime", doc.line(("runtime",)),
                        "harness watch runs registry images", f"set {pulls}")
    data = dict(doc.data)
    data["matrix"] = {**doc.data["matrix"], "image": plan.images}
    data["baseline"] = {"image": plan.images[0]}
    # The suite's lines: an error in a replaced key points at the suite's own key (or the
    # nearest enclosing one it has).
    matrix = matrixfile.parse_located(Located(doc.file, data, doc.lines), file)
    generated = (f"# harness watch {plan.repo.written}: {file} with matrix.image and "
                 f"baseline replaced\n" + dump_text(data))
    return matrix, generated


def _read_suite(file: Path) -> Located:
    text = read_text(file, "pass --matrix with the path of a suite (matrix YAML) file")
    return load_text(text, str(file))


@dataclass(frozen=True)
class WatchOutcome:
    report: Report
    sweep: SweepOutcome
    bad_tags: list[str]         # new tags with a bad cell (leak, regression vs baseline...)
    paths: list[Path]
    baseline_bad: list[str]     # cell ids: the baseline itself is bad there (no comparison)


def run_plan(plan: Plan, matrix: Matrix, cells: list[Cell], runtime: Runtime, store: RunStore,
             progress: Callable[[str], None],
             runtimes: dict[str, Runtime] | None = None) -> WatchOutcome:
    """Sweep the cells (the runtime pulls the new tags) and write the reports.

    The caller has started the runtimes (`harness.runtimes.Engines.start`).

    Raises:
        HarnessError: whatever the sweep raises (engine, image, store).
    """
    started = time.time()
    outcome = Sweep(matrix, runtime, store, progress, runtimes).run(cells, False)
    report = Report.from_results(matrix.name, outcome.results, {
        "watch": plan.repo.written, "new_tags": list(plan.new), "runtime": runtime.name,
        "started": started, "seconds": round(outcome.seconds, 3), "ran": outcome.ran,
        "reused": outcome.reused, "baseline": matrix.baseline}, store.root, outcome.series)
    paths = write_all(store, report)
    bad_refs = {r.image.ref for r in outcome.results.values() if r.verdict in BAD}
    bad = [t for t in plan.new if plan.repo.image(t) in bad_refs]
    base_bad = sorted(k for k, r in outcome.results.items()
                      if r.verdict in BAD and r.image.ref == plan.images[0])
    return WatchOutcome(report, outcome, bad, paths, base_bad)
