"""`harness explain`'s answers, read from a finished sweep: which pairs a row's first bad
and last good cell make (`pairs`), what each verdict is attributed for (`kinds_for`), and
the where records the attributed runs left (`Explanation`, `load_explanations`). The runs
themselves are a plan over the stages: `harness.explain.plan`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.analysis.kinds import BAD, GOOD, MEMORY, TIMED, kind
from harness.answers.search import answer_rows
from harness.result.codec import JSON
from harness.result.derived import DerivedFrom
from harness.result.model import CellResult, Planned
from harness.store.answers import WHERE_FILE as WHERE_FILE  # where.json (re-exported)
from harness.store.answers import where_records

EXPLAIN_DIR = "explain"


@dataclass(frozen=True)
class Pair:
    """A cell to explain and the cell it is matched with (its row's last good one)."""

    cell: str
    good: str | None
    row: str


def pairs(results: Mapping[str, CellResult], only: str | None = None,
          planned: Sequence[Planned] = (), unreadable: Collection[str] = ()) -> list[Pair]:
    """The first bad cell of each row with its last good cell (never across a missing or
    undecided one: `answers.search`; a cell is missing where `planned` has it and
    `results` lacks it), or the one cell `only` names (paired with its row's last good
    cell where it is that row's first bad)."""
    out: list[Pair] = []
    for row in answer_rows(results, planned, unreadable):
        ids = {label: cid for label, _, cid in row.cells}
        bad = ids.get(row.first_bad) if row.first_bad else None
        good = ids.get(row.last_good) if row.last_good else None
        if bad is not None and good is None:
            # Bad from the first image: matched with the first good one after it (the
            # release that fixed it), where there is one.
            after = [cid for _, verdict, cid in row.cells if verdict in GOOD]
            good = next((cid for cid in after if image_after(results, cid, bad)), None)
        if only is not None:
            if only in ids.values():
                return [Pair(only, good if only == bad else None, row.row)]
            continue
        if bad is not None:
            out.append(Pair(bad, good, row.row))
    return out


def unpaired(results: Mapping[str, CellResult], planned: Sequence[Planned] = (),
             unreadable: Collection[str] = ()) -> list[str]:
    """Rows with a bad cell that `pairs` leaves out, with why: a cell not run, unreadable
    or undecided before it may hold the first bad, so no pair is named across it."""
    return [f"{row.row}: {row.sentence}; not explained (name a CELL to explain it alone)"
            for row in answer_rows(results, planned, unreadable)
            if row.gap and any(verdict in BAD for _, verdict, _ in row.cells)]


def image_after(results: Mapping[str, CellResult], cid: str, other: str) -> bool:
    return cid in results and other in results and (
        results[cid].image.index > results[other].image.index)


def kinds_for(result: CellResult) -> tuple[str, ...]:
    """The agent's --attribute kinds for the cell's verdict (`Kind.attribute`), but the
    memory kinds of a verdict about time whose memory is not bad (no peak above the
    baseline's): a site is named for the quantity that is bad. A regression of step time
    alone was attributed with tracemalloc too, which named "heap: +0.2 KiB/call" where
    the sweep read 0.25 B/call (issue 63), and made the step 150x slower for its stacks."""
    kinds = kind(result.verdict).attribute
    if result.verdict in TIMED and not larger(result):
        return tuple(k for k in kinds if k not in MEMORY)
    return kinds


def larger(result: CellResult) -> bool:
    """The cell's peak memory read higher than its baseline's."""
    vs = result.vs_baseline
    return vs is not None and vs.peak_rss is not None and vs.peak_rss.direction == "higher"


@dataclass(frozen=True)
class Explanation:
    """cells/<id>/where.json: what one attributed run showed, and its diff with the
    paired cell (on the first bad side)."""

    cell: str
    role: str                      # "first bad", "last good" or "cell"
    paired: str | None
    kinds: tuple[str, ...]
    calls: int
    summary: tuple[str, ...]
    diff: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    errors: Mapping[str, str] = dataclasses.field(default_factory=dict)
    record: Mapping[str, JSON] = dataclasses.field(default_factory=dict)
    # The diff as report.html's table: (what, site, in the bad cell, in the good one),
    # under the two images' labels (bad, good).
    table: tuple[tuple[str, str, str, str], ...] = ()
    labels: tuple[str, str] = ("", "")
    # The run keys of the cell and its paired one when explained (None: a where.json
    # written before they were kept); `holding` checks them against the cells now.
    derived: DerivedFrom | None = None

    def to_json(self) -> dict[str, JSON]:
        return {"cell": self.cell, "role": self.role, "paired": self.paired,
                "kinds": list(self.kinds), "calls": self.calls,
                "summary": list(self.summary), "diff": list(self.diff),
                "notes": list(self.notes),
                "table": {"labels": list(self.labels), "rows": [list(r) for r in self.table]},
                "errors": dict(self.errors), "record": dict(self.record),
                "derived_from": self.derived.to_json() if self.derived is not None
                else None}

    @classmethod
    def from_json(cls, data: object) -> Explanation | None:
        """None where the file is not one (an older or damaged where.json)."""
        if not isinstance(data, dict) or not isinstance(data.get("cell"), str):
            return None

        def strings(key: str) -> tuple[str, ...]:
            v = data.get(key)
            return tuple(str(x) for x in v) if isinstance(v, list) else ()

        errors = data.get("errors")
        calls = data.get("calls")
        paired = data.get("paired")
        table: object = data.get("table")
        record: object = data.get("record")
        rows: object = table.get("rows") if isinstance(table, dict) else None
        labels: object = table.get("labels") if isinstance(table, dict) else None
        listed: list[object] = list(rows) if isinstance(rows, list) else []
        return cls(str(data["cell"]), str(data.get("role") or "cell"),
                   paired if isinstance(paired, str) else None, strings("kinds"),
                   calls if isinstance(calls, int) else 0, strings("summary"),
                   strings("diff"), strings("notes"),
                   {str(k): str(v) for k, v in errors.items()} if isinstance(errors, dict)
                   else {},
                   record=({str(k): v for k, v in record.items()} if isinstance(record, dict)
                           else {}),
                   table=tuple((str(r[0]), str(r[1]), str(r[2]), str(r[3]))
                               for r in listed if isinstance(r, list) and len(r) == 4),
                   labels=(str(labels[0]), str(labels[1])) if isinstance(labels, list)
                   and len(labels) == 2 else ("", ""),
                   derived=DerivedFrom.from_json(data.get("derived_from")))


def load_explanations(root: Path) -> dict[str, Explanation]:
    """Every cells/<id>/where.json of a results directory that reads as one."""
    out: dict[str, Explanation] = {}
    for data in where_records(root):
        ex = Explanation.from_json(data)
        if ex is not None:
            out[ex.cell] = ex
    return out


STALE = "stale: the cells changed since; `harness explain {root}` refreshes it"


def holding(found: Mapping[str, Explanation], results: Mapping[str, CellResult],
            planned: Sequence[Planned] = (), unreadable: Collection[str] = (),
            root: Path | None = None) -> tuple[dict[str, Explanation], dict[str, str]]:
    """(the explanations that still rest on the cells they name, row -> a stale note).

    An explanation holds while every cell it rests on has the run key it had when
    explained (`DerivedFrom.changed`: not run again, not unreadable, not missing) and,
    for a first bad and its last good, while they are still their row's pair (`pairs`:
    never across a missing or undecided cell). A row whose first bad is not explained
    now, where one was before, gets the stale note (`harness explain DIR` explains that
    pair); an explanation of a cell that is no row's pair now is left out unsaid."""
    if not found:       # nothing explained: no rows to answer (10,000 cells: seconds)
        return {}, {}
    now = pairs(results, None, planned, unreadable)
    paired = {(p.cell, p.good) for p in now}
    kept: dict[str, Explanation] = {}
    for cid, ex in found.items():
        if cid not in results or (ex.derived is not None and ex.derived.changed(results)):
            continue
        if ex.role == "first bad" and (cid, ex.paired) not in paired:
            continue
        if ex.role in ("last good", "fixed in") and (ex.paired, cid) not in paired:
            continue
        kept[cid] = ex
    row_of = {cid: row.row for row in answer_rows(results, planned, unreadable)
              for _, _, cid in row.cells}
    dropped = {row_of[cid] for cid in found if cid not in kept and cid in row_of}
    stale = {p.row: STALE.format(root=root if root is not None else "DIR")
             for p in now if p.row in dropped and p.cell not in kept}
    return kept, stale
