"""`harness sweep --find-cause`: per bad row, the journey to the cause, chaining the existing
plans (never copying their loops): day (`day_of`: last good and first bad day of an `as_of:`
entry) -> explain (the call site) -> culprit (the package, proved both ways) -> code (its
change against explain's sites) -> fixed (the first good image after the first bad) -> host
(on a `hosts:` sweep, each other host's first bad image: host or image?). Answers are reused
while their run keys hold; a row's goes to `cause/<row>.json`, told from its own figures.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.analysis.codediff import NOT_FETCHED, CodeAnswer
from harness.analysis.kinds import BAD, GOOD, MEMORY, UNKNOWN, kind
from harness.answers.kept import CAUSE_DIR, Cause, Explanation, cause_file, load_explanations
from harness.answers.search import Pair, RowAnswer, answer_rows, free_of, pairs, unpaired
from harness.culprit.app import RunsOn, culprit_in_run, ends
from harness.culprit.changes import difference, step_lines
from harness.days.search import day_in_run, same_entry
from harness.errors import EnvironmentUnavailable, InputError
from harness.explain import explain, kinds_for
from harness.matrixfile.model import Cell
from harness.result.codec import JSON
from harness.result.model import CellResult, DerivedFrom, Planned, cell_text
from harness.stages.orchestrator import Sweep
from harness.store import RunStore
from harness.store.gate import why_not_current
from harness.store.results import atomic_write_text, culprit_record

if TYPE_CHECKING:
    from harness.culprit.plan import Maker


NOT_A_DATE_AXIS = "not a date axis"
IMAGE, HOST, UNTOLD = "the image", "the host", "cannot tell"


@dataclass(frozen=True)
class DayAnswer:
    """A date axis's answer: last good day, first bad day, and the packages that changed."""

    last_good: str
    first_bad: str
    changed: tuple[str, ...]      # "multidict 6.4.3 -> 6.6.3 (uploaded 2025-06-30 14:02)"
    # (package, last good day's version, first bad day's version), None: not installed
    moved: tuple[tuple[str, str | None, str | None], ...] = ()


@dataclass(frozen=True)
class HostAnswer:
    """The row's first bad image on another host of a `hosts:` sweep."""

    host: str
    cell: str
    verdict: str
    text: str                     # the cell in words (`cell_text`), or why it did not run
    how: str                      # "the sweep's cell", "run", "reused"

    @property
    def changed_by(self) -> str:
        """Bad there too: the image changed the verdict; good there: the host did."""
        return IMAGE if self.verdict in BAD else HOST if self.verdict in GOOD else UNTOLD

    def words(self, image: str, here: str) -> str:
        if self.changed_by == IMAGE:
            return (f"on {self.host} too, {image} is bad ({self.text}): the image changed "
                    "the verdict, not the host")
        if self.changed_by == HOST:
            return (f"on {self.host}, {image} is good ({self.text}): the host changed the "
                    f"verdict ({here} against {self.host})")
        return (f"on {self.host}, {image} is {self.verdict} ({self.text}): cannot tell the "
                "host from the image there")


@dataclass
class Journey:
    """One row's journey, as its steps find it."""

    pair: Pair
    row: RowAnswer
    day: DayAnswer | None = None
    where: Explanation | None = None
    culprit: Mapping[str, object] | None = None   # culprit.json as written
    fixed: tuple[str, str] | None = None            # (image label, cell id)
    code: tuple[CodeAnswer, ...] = ()               # the proved change's code, read
    hosts: list[HostAnswer] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)


def call_site(where: Explanation | None) -> str | None:
    """The site that grew most in the first bad cell against the last good one."""
    if where is None or not where.table:
        return None
    return where.table[0][1]


def _changes(culprit: Mapping[str, object] | None) -> list[dict[str, str | None]]:
    """The proved set, each {name, good, bad}; empty unless culprit found one."""
    if culprit is None or culprit.get("status") != "found":
        return []
    answer = culprit.get("answer")
    return [{k: (None if c.get(k) is None else str(c.get(k))) for k in ("name", "good", "bad")}
            for c in (answer if isinstance(answer, list) else []) if isinstance(c, dict)]


def _probe(culprit: Mapping[str, object], side: str, names: set[str]) -> Mapping[str, object]:
    probes = culprit.get("probes")
    for p in probes if isinstance(probes, list) else []:
        if isinstance(p, dict) and p.get("side") == side and isinstance(
                p.get("changes"), list) and set(map(str, p["changes"])) == names:
            return p
    return {}


def _version(c: Mapping[str, str | None], side: str) -> str:
    v = c.get(side)
    return f"{c['name']} {v}" if v is not None else f"without {c['name']}"


def fixed_versions(j: Journey, results: Mapping[str, CellResult]) -> dict[str, str]:
    """The culprit's packages as the fixed image has them."""
    if j.fixed is None or j.fixed[1] not in results:
        return {}
    packages = results[j.fixed[1]].fingerprint.packages
    return {str(c["name"]): packages[str(c["name"])] for c in _changes(j.culprit)
            if str(c["name"]) in packages}


def workaround(j: Journey, results: Mapping[str, CellResult]) -> str | None:
    """Pins that keep the row good, naming only versions this run measured."""
    fixed = fixed_versions(j, results)
    # On a date axis the first bad version is the first bad day's, not the sweep's B's.
    first_bad = {name: bad for name, _, bad in j.day.moved} if j.day is not None else {}
    said = []
    for c in _changes(j.culprit):
        name, good = str(c["name"]), c.get("good")
        bad = first_bad.get(name) or c.get("bad")
        if bad is None:
            said.append(f"{name}=={good}")
        elif good is None:
            said.append(f"without {name}")
        else:
            later = fixed.get(name)
            pins = [f"{name}=={good}"] + (
                [f"{name}=={later}"] if later and later not in (bad, good) else [])
            said.append(" or ".join(pins) + f" ({'both' if len(pins) > 1 else 'the one'} "
                        f"measured good; no release between {good} and {bad} was tested)")
    return ", ".join(said) or None


def _unproved(culprit: Mapping[str, object]) -> str:
    """Culprit's answer with no package named: what else changed, or why none was proved."""
    if culprit.get("status") != "outside":
        return f"no package proved the cause ({culprit.get('status')})"
    diff = culprit.get("difference")
    other = diff.get("other") if isinstance(diff, dict) else None
    said = [f"{o.get('what')} {o.get('good')} -> {o.get('bad')}"
            for o in (other if isinstance(other, list) else []) if isinstance(o, dict)]
    return ("not the packages: B with every package change undone is still bad"
            + (f"; what else changed: {', '.join(said[:4])}" if said else ""))


def _only_memory(cell: str, results: Mapping[str, CellResult]) -> str:
    """", for memory only: it is slower (...)" where the leak's fix is a time finding."""
    res = results.get(cell)
    if res is None or res.verdict in GOOD:
        return ""
    said = ("its step time is undecided" if kind(res.verdict).cls == "undecided"
            else f"it {kind(res.verdict).verb}")
    return f" for memory only: {said} ({res.reason.split('; ')[0]})"


def summary(j: Journey, results: Mapping[str, CellResult]) -> str:
    """The row's journey in one paragraph."""
    bad = results[j.pair.cell]
    good = results.get(j.pair.good) if j.pair.good else None
    if j.day is not None:
        head = f"went bad between {j.day.last_good} and {j.day.first_bad}"
        head += f": {', '.join(j.day.changed)}" if j.day.changed else ""
    elif good is not None and good.image.index < bad.image.index:
        head = f"went bad at image {bad.image.label} (last good {good.image.label})"
    else:
        head = f"bad from the first image, {bad.image.label}"
    parts = [f"{head}: {bad.verdict}"]
    changes = _changes(j.culprit)
    if changes and j.culprit is not None:
        names = {str(c["name"]) for c in changes}
        undo, apply = _probe(j.culprit, "undo", names), _probe(j.culprit, "apply", names)
        parts.append(", ".join(f"{c['name']} {c['good'] or '-'} -> {c['bad'] or '-'}"
                               for c in changes))
        parts.append(f"with {', '.join(_version(c, 'good') for c in changes)}: "
                     f"{undo.get('verdict') or undo.get('outcome')}")
        parts.append(f"with {', '.join(_version(c, 'bad') for c in changes)}: "
                     f"{apply.get('text') or apply.get('outcome')}")
    elif j.culprit is not None:
        parts.append(_unproved(j.culprit))
    site = call_site(j.where)
    parts.append(f"at {site}" if site else "no call site (see explain's step)")
    parts += [a.words for a in j.code if a.status != NOT_FETCHED]   # not read: a step's line
    if j.fixed is not None:
        versions = fixed_versions(j, results)
        # On a date axis (`NAME@DATE` environments) the fix is a day, as the head is.
        fixed = (f"fixed from {j.fixed[0].rpartition('@')[2]}" if j.day is not None
                 else f"fixed from image {j.fixed[0]}")
        parts.append(fixed + (
            f" ({', '.join(f'{n} {v}' for n, v in versions.items())})" if versions else "")
            + _only_memory(j.fixed[1], results))
    else:
        parts.append("no later good image")
    parts += [h.words(bad.image.label, bad.host.label) for h in j.hosts]
    text = "; ".join(parts)
    fix = workaround(j, results)
    return text + (f". Workaround: {fix}" if fix else "")


def facts(j: Journey, results: Mapping[str, CellResult]) -> dict[str, JSON]:
    """The summary's parts as data (results.json's `causes`)."""
    bad = results[j.pair.cell]
    good = results.get(j.pair.good) if j.pair.good else None
    day: JSON = NOT_A_DATE_AXIS if j.day is None else {
        "last_good": j.day.last_good, "first_bad": j.day.first_bad,
        "changed": list(j.day.changed)}
    cause: JSON = None if j.culprit is None else {
        "status": str(j.culprit.get("status")),
        "changes": [dict(c) for c in _changes(j.culprit)]}
    fixed: JSON = None if j.fixed is None else {
        "image": j.fixed[0], "cell": j.fixed[1],
        "versions": dict(fixed_versions(j, results))}
    return {"first_bad": bad.image.label, "verdict": bad.verdict,
            "first_bad_cell": j.pair.cell, "last_good_cell": j.pair.good,
            "last_good": good.image.label if good is not None else None,
            "day": day, "call_site": call_site(j.where), "cause": cause,
            "code": [a.to_json() for a in j.code], "fixed": fixed,
            "workaround": workaround(j, results),
            "hosts": [{"host": h.host, "cell": h.cell, "verdict": h.verdict, "how": h.how,
                       "changed_by": h.changed_by} for h in j.hosts]}


# The journey run
Say = Callable[[str], None]
# Hybrid images for a (G cell, B cell) pair on a container runtime; None: local venvs.
Hybrids = Callable[[Cell, Cell], "Maker | None"]
# One step's progress line: its text, and how many probes it has run since the last.
Said = Callable[[str, int], None]
STEPS = ("day", "explain", "culprit", "code", "fixed", "host")


def day_of(ctx: Sweep, cells: Mapping[str, Cell], pair: Pair,
           results: Mapping[str, CellResult], say: Say) -> DayAnswer | None:
    """The day search's answer where G and B are days of one `as_of:` entry, else None."""
    if pair.good is None or pair.good not in results or pair.cell not in results:
        return None
    g_cell, b_cell = cells[pair.good], cells[pair.cell]
    runtime = ctx.runtime_for(g_cell)
    if not same_entry(g_cell, b_cell) or not runtime.capabilities.resolves_days:
        return None
    out = day_in_run(ctx.store.root, ctx.matrix, runtime, g_cell, results[pair.good],
                     b_cell, results[pair.cell], say, ctx.progress)
    return DayAnswer(out.last_good, out.first_bad, tuple(c.words() for c in out.changes),
                     tuple((c.name, c.good, c.bad) for c in out.changes))


@dataclass
class Progress:
    """'find-cause ROW [2/5 explain]: ... (about N probes left)'."""

    say: Say
    left: int = 0

    def step(self, row: str, n: int, name: str) -> Said:
        def said(text: str, probes: int = 0) -> None:
            self.left = max(0, self.left - probes)
            self.say(f"find-cause {row} [{n}/{len(STEPS)} {name}]: {text} (about "
                     f"{self.left} probe{'' if self.left == 1 else 's'} left)")

        return said


def fixed_in(row: RowAnswer, results: Mapping[str, CellResult] | None = None
             ) -> tuple[str, str] | None:
    """(label, cell id) of the first later image that answers the first bad's question
    (no leak for memory, even if slower; good for time or a crash), never across a gap.

    With the cells' `results`, a later cell free of a memory fault (`free_of`: undecided
    by its step time alone, every memory source stable, as a busy host leaves a fixed
    release) fixed it too, as the first-bad pairing reads it."""
    labels = [label for label, _, _ in row.cells]
    if row.first_bad is None or row.first_bad not in labels:
        return None
    at = labels.index(row.first_bad)
    fault = row.cells[at][1]
    memory = kind(fault).attribute == MEMORY
    for label, verdict, cid in row.cells[at + 1:]:
        res = results.get(cid) if results is not None else None
        if verdict in GOOD or (memory and verdict in BAD
                               and kind(verdict).attribute != MEMORY
                               and not kind(verdict).cut_short) or (
                res is not None and free_of(res, fault)):
            return label, cid
        if verdict in UNKNOWN:
            return None
    return None


def explained(root: Path, results: Mapping[str, CellResult], pair: Pair
              ) -> Explanation | None:
    """The pair's where.json, while it rests on the pair's cells as they are now."""
    ex = load_explanations(root).get(pair.cell)
    if ex is None or ex.paired != pair.good or ex.derived != DerivedFrom.of(
            results, (pair.cell, pair.good)):
        return None
    return ex


def culprit_answer(root: Path, results: Mapping[str, CellResult], g: Cell, b: Cell,
                   runtime: str) -> Mapping[str, object] | None:
    """culprit/<row>/culprit.json, while G, B and the ends it searched between are current."""
    data = culprit_record(root, b.row)
    if not isinstance(data, dict) or data.get("derived_from") != DerivedFrom.of(
            results, (g.id, b.id)).to_json():
        return None
    good, bad = (e.result for e in ends(root, g, b, results, runtime))
    if data.get("good") != good.id or data.get("bad") != bad.id:
        return None
    if (good.id, bad.id) != (g.id, b.id) and data.get("searched") != DerivedFrom.of(
            {good.id: good, bad.id: bad}, (good.id, bad.id)).to_json():
        return None
    return data


def other_host_cells(cells: Sequence[Cell], cell: Cell) -> list[Cell]:
    """The same image, GPU and scenario on each other host of a `hosts:` matrix."""
    return [c for c in cells if c.host.label != cell.host.label
            and c.image.label == cell.image.label and c.gpu.label == cell.gpu.label
            and c.scenario.id == cell.scenario.id]


def expected(root: Path, cells: Mapping[str, Cell], results: Mapping[str, CellResult],
             todo: Sequence[Pair], step: int = 1,
             runtime: Callable[[Cell], str] = lambda c: "local") -> int:
    """Probes the chain still expects; none for an answer that still holds."""
    n = 0
    for i, pair in enumerate(todo):
        start = step if i == 0 else 1
        if start <= 2 and explained(root, results, pair) is None:
            n += 1 + (pair.good is not None)
        g, b = results.get(pair.good or ""), results[pair.cell]
        if start <= 3 and g is not None and g.verdict in GOOD and b.verdict in BAD and (
                culprit_answer(root, results, cells[g.id], cells[b.id],
                               runtime(cells[g.id])) is None):
            good, bad = ends(root, cells[g.id], cells[b.id], results, runtime(cells[g.id]))
            changes = len(difference(good.result, bad.result).packages)   # as searched
            n += 2 + 2 * math.ceil(math.log2(changes)) if changes > 1 else 2 * changes
        if start <= 6 and pair.cell in cells:
            n += sum(1 for c in other_host_cells(list(cells.values()), cells[pair.cell])
                     if c.id not in results)
    return n


def find_causes(ctx: Sweep, cells: Sequence[Cell], results: Mapping[str, CellResult],
                planned: Sequence[Planned], hybrids: Hybrids, say: Say) -> dict[str, Cause]:
    """Run each bad row's journey and write its cause/<row>.json; row -> its answer.

    Raises:
        InputError: a cell of a pair is not in `cells` (the matrix changed since the sweep).
    """
    root = ctx.store.root
    by_id = {c.id: c for c in cells}
    rows = {r.row: r for r in answer_rows(results, planned)}
    todo = pairs(results, planned=planned)
    gone = [cid for p in todo for cid in (p.cell, p.good) if cid and cid not in by_id]
    if gone:
        raise InputError(f"cell {gone[0]} is not in matrix {ctx.matrix.file} (did it change "
                         "since the sweep?); run the sweep again without --resume")
    for line in unpaired(results, planned):
        say(f"find-cause: {line}")
    if not todo:
        say("find-cause: no row has a bad cell; nothing to search")
        return {}
    progress = Progress(say)
    out: dict[str, Cause] = {}
    for i, pair in enumerate(todo):
        journey = Journey(pair, rows[pair.row])
        for n, (name, step) in enumerate(zip(STEPS, STEP_RUNS, strict=True), 1):
            if ctx.cancel.is_set():
                return out
            # Recounted per step so a finished step's estimate is not carried on.
            progress.left = expected(root, by_id, results, todo[i:], n,
                                     lambda c: ctx.runtime_for(c).name)
            step(ctx, by_id, journey, results, hybrids, progress.step(pair.row, n, name))
        out[pair.row] = write_cause(root, journey, results)
        say(f"find-cause {pair.row}: {out[pair.row].summary}")
    return out


def write_cause(root: Path, j: Journey, results: Mapping[str, CellResult]) -> Cause:
    """cause/<row>.json: the summary, the steps, the facts and the cells they rest on."""
    rests_on = (j.pair.cell, j.pair.good, j.fixed[1] if j.fixed else None,
                *(h.cell for h in j.hosts if h.how == SWEPT))
    cause = Cause(j.pair.row, summary(j, results), tuple(j.steps), facts(j, results),
                  DerivedFrom.of(results, rests_on))
    path = cause_file(root, j.pair.row)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(cause.to_json(), indent=1) + "\n")
    return cause


Step = Callable[["Sweep", Mapping[str, Cell], Journey, Mapping[str, CellResult], Hybrids,
                 Said], None]
SWEPT = "the sweep's cell"


def step_day(ctx: Sweep, cells: Mapping[str, Cell], j: Journey,
             results: Mapping[str, CellResult], hybrids: Hybrids, said: Said) -> None:
    j.day = day_of(ctx, cells, j.pair, results,
                   lambda text: said(text, getattr(text, "probed", 0)))
    text = (f"{NOT_A_DATE_AXIS}: the images are the axis" if j.day is None else
            f"last good {j.day.last_good}, first bad {j.day.first_bad}: "
            + (", ".join(j.day.changed) or "no package changed"))
    said(text, 0)
    j.steps.append(f"day: {text}")


def step_explain(ctx: Sweep, cells: Mapping[str, Cell], j: Journey,
                 results: Mapping[str, CellResult], hybrids: Hybrids, said: Said) -> None:
    pair = j.pair
    j.where = explained(ctx.store.root, results, pair)
    if j.where is not None:
        said(f"{pair.cell}: its where.json holds (same run keys); reused", 0)
    else:
        said(f"{pair.cell} against {pair.good or 'no good cell'}: running with attribution",
             0)
        j.where = explain(ctx.ctx, results, cells, [pair], ctx.store.root).get(pair.cell)
        said(f"{pair.cell}: attributed", 1 + (pair.good is not None))
    found = list(j.where.diff or j.where.summary) if j.where is not None else []
    j.steps.append("explain: " + ("; ".join(found[:3]) if found else
                                  "the attributed run left no where record"))


def step_culprit(ctx: Sweep, cells: Mapping[str, Cell], j: Journey,
                 results: Mapping[str, CellResult], hybrids: Hybrids, said: Said) -> None:
    pair = j.pair
    if pair.good is None:
        said("no good image in the row to swap packages from; skipped", 0)
        j.steps.append("culprit: no good image in the row to swap packages from")
        return
    g, b = cells[pair.good], cells[pair.cell]
    j.culprit = culprit_answer(ctx.store.root, results, g, b, ctx.runtime_for(g).name)
    if j.culprit is not None:
        said("its culprit.json holds (the run keys of G and B); reused", 0)
    else:
        good, bad = ends(ctx.store.root, g, b, results, ctx.runtime_for(g).name)
        if (good.result.id, bad.result.id) == (g.id, b.id):   # else the search says which
            said(f"between G {good.result.image.label} and B {bad.result.image.label}", 0)
        try:
            j.culprit = run_culprit(ctx, g, b, results, hybrids, said)
        except EnvironmentUnavailable as exc:
            # No hybrids on this engine: the chain goes on.
            why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            said(f"not searched: {why}", 0)
            j.steps.append(f"culprit: not searched: {why}")
            return
    j.steps.append(f"culprit: {j.culprit.get('sentence')}")


def run_culprit(ctx: Sweep, g: Cell, b: Cell, results: Mapping[str, CellResult],
                hybrids: Hybrids, said: Said) -> Mapping[str, object]:
    """`harness culprit`'s search for the row, into culprit/<row>/ of the sweep."""
    on = RunsOn(ctx.matrix, ctx.runtime, ctx.progress, ctx.runtimes)
    _, data = culprit_in_run(ctx.store.root, on, g, b, results,
                             lambda s: said(s, int(s.startswith("probe "))), hybrids(g, b))
    return data


def step_code(ctx: Sweep, cells: Mapping[str, Cell], j: Journey,
              results: Mapping[str, CellResult], hybrids: Hybrids, said: Said) -> None:
    """The proved change's code against the attributed sites (`culprit.changes`)."""
    found, lines = step_lines(j.culprit, j.where, kinds=kinds_for(results[j.pair.cell]))
    j.code = tuple(found)
    for line in lines:
        said(line, 0)
        j.steps.append(f"code: {line}")


def step_fixed(ctx: Sweep, cells: Mapping[str, Cell], j: Journey,
               results: Mapping[str, CellResult], hybrids: Hybrids, said: Said) -> None:
    j.fixed = fixed_in(j.row, results)
    text = (f"first good image after {j.row.first_bad}: {j.fixed[0]}" if j.fixed
            else f"no good image after {j.row.first_bad}")
    said(text, 0)
    j.steps.append(f"fixed: {text}")


def step_host(ctx: Sweep, cells: Mapping[str, Cell], j: Journey,
              results: Mapping[str, CellResult], hybrids: Hybrids, said: Said) -> None:
    bad = cells[j.pair.cell]
    others = other_host_cells(list(cells.values()), bad)
    if not others:
        said("one host: nothing to compare", 0)
        return
    for other in others:
        found = results.get(other.id)
        how = SWEPT
        if found is None:
            said(f"{bad.image.label} on {other.host.label} too", 0)
            found, how = on_host(ctx, other, j.pair.row)
            said(f"{other.id}: {found.verdict}", 1 if how == "run" else 0)
        answer = HostAnswer(other.host.label, other.id, str(found.verdict),
                            cell_text(found), how)
        j.hosts.append(answer)
        j.steps.append(f"host: {answer.words(bad.image.label, bad.host.label)} [{how}]")


def on_host(ctx: Sweep, cell: Cell, row: str) -> tuple[CellResult, str]:
    """Run the cell (GPU precheck first) into cause/<row>/, reusing a current result."""
    store = RunStore(ctx.store.root / CAUSE_DIR / row)
    store.lock()
    try:
        old = store.load_cell(cell.id)
        if old is not None and why_not_current(old, cell, ctx.runtime_for(cell).name) is None:
            return old, "reused"
        result = Sweep(ctx.matrix, ctx.runtime, store, ctx.progress,
                       ctx.runtimes).run_cell(cell).result
        store.write_cell(result)
    finally:
        store.unlock()
    return result, "run"


STEP_RUNS: tuple[Step, ...] = (step_day, step_explain, step_culprit, step_code, step_fixed,
                               step_host)
