"""`harness explain`'s answers read back: cells/<id>/where.json (`Explanation`), and those
that still rest on their cells (`holding`). The runs are `harness.explain`."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.answers.search import answer_rows, pairs
from harness.result.codec import JSON
from harness.result.model import CellResult, DerivedFrom, Planned
from harness.store.results import where_records


@dataclass(frozen=True)
class Explanation:
    """cells/<id>/where.json: one attributed run, and its diff with the paired cell."""

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
    # The diff as report.html's table: (what, site, bad, good), under labels (bad, good).
    table: tuple[tuple[str, str, str, str], ...] = ()
    labels: tuple[str, str] = ("", "")
    # The run keys of the cell and its pair when explained, for `holding` (None: older).
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
    """(the explanations whose cells keep their run keys and, for a first bad, are still
    the row's pair; row -> a stale note where a first bad lost its explanation)."""
    if not found:       # nothing explained: skip the costly pairing
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
