"""The answers kept beside a sweep's results, read back, each with the run keys of the
cells it rests on so that a stale one is left out and said (`*_holding`):
`harness explain`'s cells/<id>/where.json (`Explanation`; the runs are `harness.explain`),
`harness culprit`'s culprit/<row>/culprit.json (`Culprit`) and `--find-cause`'s
cause/<row>.json (`Cause`)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.analysis import kinds
from harness.answers.search import answer_rows, pairs
from harness.result.codec import JSON
from harness.result.model import CellResult, DerivedFrom, Planned
from harness.store.results import CULPRIT_DIR, CULPRIT_FILE, culprit_records, where_records

# Where the answers are (read by `harness.store.results`, the store's reader of them).
__all__ = ["CULPRIT_DIR", "CULPRIT_FILE", "Cause", "Culprit", "Explanation", "cause_file",
           "causes_holding", "culprits_holding", "explanations_holding", "load_causes",
           "load_culprits", "load_explanations", "results_json"]


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
    # The run keys of the cell and its pair when explained (None: older).
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


EXPLAIN_STALE = "stale: the cells changed since; `harness explain {root}` refreshes it"


def explanations_holding(found: Mapping[str, Explanation], results: Mapping[str, CellResult],
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
    stale = {p.row: EXPLAIN_STALE.format(root=root if root is not None else "DIR")
             for p in now if p.row in dropped and p.cell not in kept}
    return kept, stale


CULPRIT_STALE = ("stale: the cells it searched between changed since ({cells}); "
         "`harness culprit {root} {row}` searches them again")


@dataclass(frozen=True)
class Culprit:
    row: str
    status: str          # found, outside, not-proved, no-fix, no-changes, not-bad
    sentence: str
    probes: tuple[str, ...]   # each probe in words, in the order they ran
    # the run keys of G and B it was searched between (None: written before they were)
    derived: DerivedFrom | None = None

    def lines(self) -> list[str]:
        return [self.sentence, *(f"probe {i}: {p}" for i, p in enumerate(self.probes, 1))]


def probe_words(probe: dict[str, object]) -> str:
    """A stored probe in words: 'B with multidict undone: ok: heap ... -> good [image]'."""
    base = "B" if probe.get("side") == "undo" else "G"
    how = "undone" if probe.get("side") == "undo" else "applied"
    names = probe.get("changes")
    what = ", ".join(str(n) for n in names) if isinstance(names, list) else "?"
    said = probe.get("text") or probe.get("outcome")
    return (f"{base} with {what} {how}: {said} -> {probe.get('outcome')} "
            f"[{probe.get('image')}, {probe.get('how')}]")


def load_culprits(root: Path) -> dict[str, Culprit]:
    """Row -> what `harness culprit` answered; an unreadable file is left out."""
    out: dict[str, Culprit] = {}
    for data in culprit_records(root):
        if not isinstance(data, dict):
            continue
        row: object = data.get("row")
        probes: object = data.get("probes")
        if not isinstance(row, str):
            continue
        said = tuple(probe_words(p) for p in probes if isinstance(p, dict)) if isinstance(
            probes, list) else ()
        out[row] = Culprit(row, str(data.get("status")), str(data.get("sentence", "")), said,
                           DerivedFrom.from_json(data.get("derived_from")))
    return out


def culprits_holding(found: Mapping[str, Culprit], results: Mapping[str, CellResult],
            root: Path | None) -> dict[str, Culprit]:
    """Each row's answer while G and B keep their run keys; else the stale note with the
    command that searches again. An answer without run keys stands."""
    out: dict[str, Culprit] = {}
    for row, found_row in found.items():
        changed = found_row.derived.changed(results) if found_row.derived else []
        if not changed:
            out[row] = found_row
            continue
        note = CULPRIT_STALE.format(cells=", ".join(changed), root=root or "DIR", row=row)
        out[row] = Culprit(row, kinds.STALE, note, ())
    return out


CAUSE_DIR = "cause"
CAUSE_STALE_PAIR = ("stale: the row's first bad or last good is another cell now; "
                    "`harness sweep MATRIX --find-cause --resume {root}` finds it again")
CAUSE_STALE = ("stale: the cells it rests on changed since ({cells}); `harness sweep MATRIX "
               "--find-cause --resume {root}` finds it again")


def cause_file(root: Path, row: str) -> Path:
    return root / CAUSE_DIR / f"{row}.json"


@dataclass(frozen=True)
class Cause:
    """One bad row's journey: summary, steps in words, facts, and the cells it rests on."""

    row: str
    summary: str
    steps: tuple[str, ...] = ()
    facts: Mapping[str, JSON] = field(default_factory=dict)
    derived: DerivedFrom | None = None
    stale: bool = False

    def lines(self) -> list[str]:
        return [self.summary, *self.steps]

    def to_json(self) -> dict[str, JSON]:
        return {"row": self.row, "summary": self.summary, "steps": list(self.steps),
                "facts": dict(self.facts),
                "derived_from": self.derived.to_json() if self.derived is not None else None}

    @classmethod
    def from_json(cls, data: object) -> Cause | None:
        """None where the object is not one (a damaged or foreign file)."""
        if not isinstance(data, dict) or not isinstance(data.get("row"), str) or not (
                isinstance(data.get("summary"), str)):
            return None
        steps: object = data.get("steps")
        facts: object = data.get("facts")
        return cls(str(data["row"]), str(data["summary"]),
                   tuple(str(s) for s in steps) if isinstance(steps, list) else (),
                   {str(k): v for k, v in facts.items()} if isinstance(facts, dict) else {},
                   DerivedFrom.from_json(data.get("derived_from")))


def load_causes(root: Path) -> dict[str, Cause]:
    """Row -> its journey; an unreadable file is left out."""
    out: dict[str, Cause] = {}
    base = root / CAUSE_DIR
    if not base.is_dir():
        return out
    for path in sorted(base.glob("*.json")):
        try:
            data: object = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        found = Cause.from_json(data)
        if found is not None:
            out[found.row] = found
    return out


def causes_holding(found: Mapping[str, Cause], results: Mapping[str, CellResult],
            root: Path | None, planned: Sequence[Planned] = (),
            unreadable: Collection[str] = ()) -> dict[str, Cause]:
    """Each row's journey while its cells are unchanged and still the row's pair; else
    the stale note with the command that finds it again."""
    now = {p.row: (p.cell, p.good) for p in pairs(results, None, planned, unreadable)}
    out: dict[str, Cause] = {}
    for row, cause in found.items():
        changed = cause.derived.changed(results) if cause.derived else []
        pair = (cause.facts.get("first_bad_cell"), cause.facts.get("last_good_cell"))
        if not changed and ("first_bad_cell" not in cause.facts or now.get(row) == pair):
            out[row] = cause
            continue
        note = (CAUSE_STALE.format(cells=", ".join(changed), root=root or "DIR") if changed else
                CAUSE_STALE_PAIR.format(root=root or "DIR"))
        out[row] = Cause(row, note, stale=True)
    return out


def results_json(causes: Mapping[str, Cause]) -> dict[str, JSON]:
    """results.json's `causes`: row -> summary, steps and facts (or the stale note)."""
    return {row: {"summary": c.summary, "steps": list(c.steps), "facts": dict(c.facts),
                  "stale": c.stale} for row, c in sorted(causes.items())}
