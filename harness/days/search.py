"""`harness day`: the day a dated row went bad, between its last good day G and first bad
day B. `search_days` halves the `as_of:` days but runs a day only when its pins are new
(G's pins are good, B's bad): one cell per distinct resolution, not per day. It is pure
over `resolve` and `probe`; `day_of_row` wires it to a sweep (probes in `day/<row>/`), and
`day_command` searches each dated row that went bad (`cli.day` parses and prints).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.answers.search import pairs
from harness.app import answer
from harness.app.command import printer
from harness.culprit.app import known_rows, started
from harness.culprit.plan import SweepRunner, outcome_of
from harness.culprit.search import BAD as PROBE_BAD
from harness.culprit.search import GOOD as PROBE_GOOD
from harness.errors import EXIT_OK, EXIT_REGRESSION, EXIT_UNDECIDED, InputError, interruptible
from harness.matrixfile.cells import dated_cell
from harness.result.model import DerivedFrom
from harness.runtimes import Engines
from harness.runtimes.resolver import upload_time, yanked_releases, yanked_words
from harness.stages.orchestrator import Sweep
from harness.store import RunStore
from harness.store.gate import read_gated
from harness.store.results import DAY_DIR, DAY_FILE, SeriesCache, atomic_write_text

if TYPE_CHECKING:
    from harness.matrixfile.model import Cell, Matrix
    from harness.protocol.series import Series
    from harness.result.model import CellResult
    from harness.runtimes.base import Runtime
    from harness.store.gate import Gated


Pins = tuple[str, ...]
Resolve = Callable[[str], Pins]
Probe = Callable[[str, Pins], str]          # -> PROBE_GOOD, PROBE_BAD or untestable
Say = Callable[[str], None]
Uploaded = Callable[[str, str], "str | None"]   # (package, version) -> upload time
# package -> {version: reason} of its releases the index marks yanked (PEP 592)
Yanked = Callable[[str], "Mapping[str, str]"]


class DayLine(str):
    """A line the day search says; `probed` is 1 where its day was run, else 0."""

    probed: int = 0

    @classmethod
    def of(cls, text: str, probed: int) -> DayLine:
        line = cls(text)
        line.probed = probed
        return line


@dataclass(frozen=True)
class Change:
    """A package whose pin differs between the last good and the first bad day."""

    name: str
    good: str | None        # None: not installed that day
    bad: str | None
    uploaded: str | None = None   # when the first bad day's file reached the index
    # (version, reason) of each yanked release the change lands on or passes over
    yanked: tuple[tuple[str, str], ...] = ()

    def words(self) -> str:
        """"multidict 6.4.4 -> 6.5.1 (uploaded ...; passes over 6.5.0 (yanked: reason))"."""
        marked = dict(self.yanked)

        def side(version: str | None) -> str:
            return "-" if version is None else (
                yanked_words(version, marked[version]) if version in marked else version)

        over = [yanked_words(v, r) for v, r in self.yanked if v not in (self.good, self.bad)]
        notes = ([f"uploaded {self.uploaded}"] if self.uploaded else []) + (
            [f"passes over {', '.join(over)}"] if over else [])
        when = f" ({'; '.join(notes)})" if notes else ""
        return f"{self.name} {side(self.good)} -> {side(self.bad)}{when}"


@dataclass
class DayOutcome:
    """How the day search ended. `last_good`/`first_bad` are days (YYYY-MM-DD)."""

    row: str
    last_good: str
    first_bad: str
    good_pins: Pins = ()
    bad_pins: Pins = ()
    changes: list[Change] = field(default_factory=list)
    resolutions: int = 0    # days resolved (cached ones included)
    probes: int = 0         # days probed with a cell (reused ones included)
    reused: int = 0         # of those, results an earlier search left that still hold
    untestable: str | None = None   # the day whose run decided nothing, if it stopped
    steps: list[str] = field(default_factory=list)
    # The runs (day, cell id) standing for G's and B's environments, for culprit's `ends`.
    good_run: str = ""
    bad_run: str = ""
    good_cell: str | None = None
    bad_cell: str | None = None

    @property
    def found(self) -> bool:
        return self.untestable is None and _next(self.last_good) == self.first_bad

    def sentence(self) -> str:
        moved = "; ".join(c.words() for c in self.changes) or "no package changed"
        if self.good_pins and self.good_pins == self.bad_pins:
            return (f"{self.last_good} and {self.first_bad} resolve to the same pins: what "
                    "changed the verdict is not a package (noise, or the host)")
        if self.found:
            return f"went bad between {self.last_good} and {self.first_bad}: {moved}"
        return (f"stopped: {self.untestable} ran untestable; went bad between "
                f"{self.last_good} and {self.first_bad} ({moved})")

    def counts(self) -> str:
        """"8 days resolved, 4 probes (4 run)": what the answer cost."""
        return (f"{self.resolutions} days resolved, {self.probes} probes "
                f"({self.probes - self.reused} run, {self.reused} reused)")

    def to_dict(self) -> dict[str, object]:
        return {"row": self.row, "last_good": self.last_good, "first_bad": self.first_bad,
                "found": self.found, "untestable": self.untestable,
                "good_pins": list(self.good_pins), "bad_pins": list(self.bad_pins),
                "changes": [dataclasses.asdict(c) for c in self.changes],
                "resolutions": self.resolutions, "probes": self.probes,
                "reused": self.reused, "steps": self.steps, "good_cell": self.good_cell,
                "bad_cell": self.bad_cell}


def _day(text: str) -> dt.date:
    return dt.date.fromisoformat(text)


def _next(day: str) -> str:
    return (_day(day) + dt.timedelta(days=1)).isoformat()


def pin_map(pins: Pins) -> dict[str, str]:
    """`("aiohttp==3.12.14", ...)` -> {"aiohttp": "3.12.14", ...} (names as pinned)."""
    return {p.split("==", 1)[0].strip().lower(): p.split("==", 1)[1].strip()
            for p in pins if "==" in p}


def release_key(version: str) -> tuple[int, ...] | None:
    """`6.5.0.post1` -> (6, 5, 0), to order pins; None for a pre/dev release or junk."""
    public = version.split("+", 1)[0].lower()
    found = re.fullmatch(r"v?(\d+(?:\.\d+)*)((?:[-_.]?post\d*)?)", public)
    if found is None:
        return None
    parts = [int(n) for n in found.group(1).split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def passed_over(good: str | None, bad: str | None, yanked: Mapping[str, str]
                ) -> tuple[tuple[str, str], ...]:
    """The yanked releases a change from `good` to `bad` lands on or passes over."""
    ends = [k for k in (release_key(good or ""), release_key(bad or "")) if k is not None]
    lo, hi = (min(ends), max(ends)) if len(ends) == 2 else (None, None)
    out = []
    for version, reason in yanked.items():
        key = release_key(version)
        if version in (good, bad) or (key is not None and lo is not None and hi is not None
                                      and lo < key < hi):
            out.append((key or (), version, reason))
    return tuple((v, r) for _, v, r in sorted(out))


def changes(good: Pins, bad: Pins, uploaded: Uploaded | None = None,
            yanked: Yanked | None = None) -> list[Change]:
    """Every package whose pin moved, came or went, with upload time and yanked releases."""
    g, b = pin_map(good), pin_map(bad)
    out = []
    for name in sorted(set(g) | set(b)):
        if g.get(name) != b.get(name):
            when = uploaded(name, b[name]) if uploaded is not None and name in b else None
            marked = passed_over(g.get(name), b.get(name), yanked(name)) if (
                yanked is not None) else ()
            out.append(Change(name, g.get(name), b.get(name), when, marked))
    return out


def halvings(days: int) -> int:
    """Days a search over `days` days between its ends resolves at most: ceil(log2(n+1))."""
    return (days).bit_length()


def search_days(row: str, good_day: str, bad_day: str, resolve: Resolve, probe: Probe,
                say: Say, uploaded: Uploaded | None = None,
                yanked: Yanked | None = None) -> DayOutcome:
    """The last good and first bad day between `good_day` (good) and `bad_day` (bad).

    Args:
        resolve, probe: A day's pins (as of 00:00 UTC); their run: PROBE_GOOD, PROBE_BAD, or stop.
        uploaded, yanked: (package, version) -> upload time; package -> {version: reason}.

    Raises: ValueError: `bad_day` not after `good_day`.
    """
    if _day(bad_day) <= _day(good_day):
        raise ValueError(f"the bad day {bad_day} is not after the good day {good_day}")
    out = DayOutcome(row, good_day, bad_day, good_run=good_day, bad_run=bad_day)
    pins = {good_day: resolve(good_day), bad_day: resolve(bad_day)}
    out.resolutions = 2
    lo, hi = good_day, bad_day
    if pins[lo] == pins[hi]:
        out.untestable = bad_day
        out.good_pins = out.bad_pins = pins[lo]
        out.steps.append(f"{good_day} and {bad_day} resolve to the same pins: no day "
                         "between them changed a package")
        say(out.steps[-1])
        return out
    seen: dict[Pins, str] = {pins[good_day]: PROBE_GOOD, pins[bad_day]: PROBE_BAD}
    stood = {pins[good_day]: good_day, pins[bad_day]: bad_day}   # pins -> the day run
    between = (_day(hi) - _day(lo)).days - 1
    say(f"{between} day(s) between {lo} and {hi}: at most {halvings(between)} resolved, "
        "each run only where its pins are new")
    while (_day(hi) - _day(lo)).days > 1:
        mid = (_day(lo) + (_day(hi) - _day(lo)) / 2).isoformat()
        pins[mid] = resolve(mid)
        out.resolutions += 1
        known = seen.get(pins[mid])
        if known is None:
            known = probe(mid, pins[mid])
            out.probes += 1
            seen[pins[mid]], stood[pins[mid]] = known, mid
            how, ran = f"probe {out.probes}", 1
        else:
            how, ran = "same pins as a day already known, not run", 0
        if known == PROBE_GOOD:
            lo = mid
        elif known == PROBE_BAD:
            hi = mid
        else:
            out.untestable = mid
        left = (_day(hi) - _day(lo)).days - 1
        line = (f"{mid} [{how}]: {known}; "
                + (f"stop: {mid} is untestable" if out.untestable
                   else f"went bad between {lo} and {hi} ({left} day(s) between)"))
        out.steps.append(line)
        say(DayLine.of(line, ran))
        if out.untestable:
            break
    out.last_good, out.first_bad = lo, hi
    out.good_pins, out.bad_pins = pins[lo], pins[hi]
    out.good_run, out.bad_run = stood[pins[lo]], stood[pins[hi]]
    out.changes = changes(pins[lo], pins[hi], uploaded, yanked)
    return out




def same_entry(good: Cell, bad: Cell) -> bool:
    """Two dated images of one `as_of:` entry (what the day search needs)."""
    return (good.image.as_of is not None and bad.image.as_of is not None
            and good.image.label.rpartition("@")[0] == bad.image.label.rpartition("@")[0]
            and good.image.pip == bad.image.pip and good.image.python == bad.image.python)


def day_of_row(sweep: Sweep, g_cell: Cell, good: CellResult, b_cell: Cell,
               bad: CellResult, say: Say, g_series: Series | None = None,
               uploaded: Uploaded | None = None, yanked: Yanked | None = None
               ) -> DayOutcome:
    """Search the days between G and B, probing through `sweep`; current probes reused.

    Args:
        sweep: A Sweep over the local runtime, its store the probes' directory.
        g_cell, good, b_cell, bad: G's cell and result; B's.
        g_series, uploaded, yanked: G's samples, if not in the store; as `search_days`.

    Raises: ValueError: G and B not two days of one `as_of:` entry, or B not after G;
    resolver.TooEarly, resolver.Unreachable: a day cannot be resolved.
    """
    if not same_entry(g_cell, b_cell):
        raise ValueError(f"{g_cell.image.label} and {b_cell.image.label} are not two days "
                         "of one `as_of:` image entry")
    runtime = sweep.runtime_for(g_cell)
    if not runtime.capabilities.resolves_days:
        raise ValueError("the day search resolves on the local runtime; this sweep runs "
                         f"{runtime.name}")
    runner = SweepRunner(sweep, g_cell, good, g_series)
    assert g_cell.image.as_of is not None and b_cell.image.as_of is not None
    ran = {g_cell.image.as_of: good.id, b_cell.image.as_of: bad.id}   # day -> its cell

    def resolve(day: str) -> Pins:
        return runtime.pins(dated_cell(g_cell, day).image)

    def probe(day: str, pins: Pins) -> str:
        result = runner(dated_cell(g_cell, day))
        ran[day] = result.id
        say(f"{result.image.label}: {result.verdict} ({result.reason})")
        return outcome_of(result, bad)

    out = search_days(b_cell.row, g_cell.image.as_of, b_cell.image.as_of, resolve, probe,
                      say, uploaded, yanked)
    out.reused = len(runner.cached)
    out.good_cell, out.bad_cell = ran.get(out.good_run), ran.get(out.bad_run)
    return out


def day_in_run(root: Path, matrix: Matrix, runtime: Runtime, g_cell: Cell,
               good: CellResult, b_cell: Cell, bad: CellResult, say: Say,
               progress: Say) -> DayOutcome:
    """`day_of_row` for results directory `root`: probes and day.json in `root/day/<row>/`.

    Args:
        matrix, runtime: The sweep's matrix; a started local runtime.
        g_cell, good, b_cell, bad, say, progress: As `day_of_row`; the sweep's progress lines.

    Raises: as `day_of_row` (ValueError too: `runtime` is not local); StoreError:
    `root/day/<row>/` is locked by another search.
    """

    store = RunStore(root / DAY_DIR / b_cell.row)
    store.lock()
    try:
        sweep = Sweep(matrix, runtime, store, progress)
        out = day_of_row(sweep, g_cell, good, b_cell, bad, say, SeriesCache(root)(g_cell.id),
                         upload_time, yanked_releases)
        # G and B by run key (`ends` reads it back).
        data = {**out.to_dict(), "derived_from": DerivedFrom.of(
            {good.id: good, bad.id: bad}, (good.id, bad.id)).to_json()}
        atomic_write_text(store.root / DAY_FILE, json.dumps(data, indent=1) + "\n")
    finally:
        store.unlock()
    return out


def day_command(root: Path, row: str | None = None, matrix_file: Path | None = None,
                quiet: bool = False) -> int:
    """Search each dated row's days (only `row`'s) in `root`; the exit code.

    Raises:
        InputError: an unknown row, no matrix found, or a row that cannot be searched.
    """
    found, matrix = read_gated(root, matrix_file)
    undated(root, found)
    todo = dated_pairs(found, row)
    if not todo:
        answer.say("no dated row went bad after a good day: nothing to search")
        return EXIT_OK
    if matrix is None:
        raise InputError(found.unchecked)
    engines = Engines.for_matrix(matrix, "local", None)
    todo, cells = started(found, todo, matrix, engines, "harness day")
    if not todo:
        return EXIT_UNDECIDED
    outcomes = search(quiet, root, found, (matrix, engines), cells, todo)
    if any(not o.found for o in outcomes):
        return EXIT_UNDECIDED
    return EXIT_REGRESSION if outcomes else EXIT_OK


def undated(root: Path, found: Gated) -> None:
    """Refuse a directory with no dated image: there is nothing the day search can take.

    Raises:
        InputError: no readable cell of the directory is of an `as_of:` image.
    """
    if not any(r.image.labels.get("as_of") for r in (*found.results.values(),
                                                       *found.was.values())):
        raise InputError(f"{root}: no dated image (as_of:) here: harness day searches the "
                         "days between a dated row's last good and first bad day\n  fix: "
                         "give an image `as_of:` days in the matrix (docs/asof.md) and sweep "
                         f"it; which package change made an image bad: harness culprit {root}")


def dated_pairs(found: Gated, row: str | None) -> list[tuple[str, str]]:
    """(last good cell id, first bad cell id) of each dated row to search.

    Raises:
        InputError: an unknown row.
    """
    # Stale cells too, so a stale row is said to be stale, not "nothing to search".
    res = {**found.results, **found.was}
    known_rows(res, row)
    return [(p.good, p.cell) for p in pairs(res, None, found.planned, found.unreadable)
            if p.good is not None and (row is None or p.row == row)
            and res[p.good].image.labels.get("as_of") and res[p.cell].image.labels.get("as_of")
            and res[p.good].image.index < res[p.cell].image.index]


def search(quiet: bool, root: Path, found: Gated,
           run_on: tuple[Matrix, Engines], cells: dict[str, Cell],
           todo: list[tuple[str, str]]) -> list[DayOutcome]:
    """Each row's days searched in day/<row>/ of the run, the answer in day.json there."""
    matrix, engines = run_on
    outcomes: list[DayOutcome] = []
    with interruptible(), engines.stopped():
        for g_id, b_id in todo:
            g, b = cells[g_id], cells[b_id]
            print(f"day {b.row}: {g.image.label} ({found.results[g_id].verdict}) .. "
                  f"{b.image.label} ({found.results[b_id].verdict})", flush=True)
            try:
                out = day_in_run(root, matrix, engines.default, g, found.results[g_id],
                                 b, found.results[b_id],
                                 lambda s: print(f"  {s}", flush=True),
                                 printer(quiet))
            except ValueError as exc:
                raise InputError(f"{b.row}: {exc}") from exc
            print(f"{b.row}: {out.sentence()}\n  {out.counts()}", flush=True)
            outcomes.append(out)
            answer.update(rows=[{**o.to_dict(), "sentence": o.sentence()}
                                for o in outcomes])
    return outcomes
