"""`--find-cause`'s answers read back: one `cause/<row>.json` per bad row (`Cause`), kept
with the run keys of its cells so a stale one is left out and said (`holding`)."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.answers.search import pairs
from harness.result.codec import JSON
from harness.result.model import CellResult, DerivedFrom, Planned

CAUSE_DIR = "cause"
STALE_PAIR = ("stale: the row's first bad or last good is another cell now; `harness sweep "
              "MATRIX --find-cause --resume {root}` finds it again")
STALE = ("stale: the cells it rests on changed since ({cells}); `harness sweep MATRIX "
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


def holding(found: Mapping[str, Cause], results: Mapping[str, CellResult],
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
        note = (STALE.format(cells=", ".join(changed), root=root or "DIR") if changed else
                STALE_PAIR.format(root=root or "DIR"))
        out[row] = Cause(row, note, stale=True)
    return out


def results_json(causes: Mapping[str, Cause]) -> dict[str, JSON]:
    """results.json's `causes`: row -> summary, steps and facts (or the stale note)."""
    return {row: {"summary": c.summary, "steps": list(c.steps), "facts": dict(c.facts),
                  "stale": c.stale} for row, c in sorted(causes.items())}
