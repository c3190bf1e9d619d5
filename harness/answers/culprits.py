"""What `harness culprit` answered, read back: one `culprit/<row>/culprit.json` per row."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.analysis import kinds
from harness.result.model import CellResult, DerivedFrom
from harness.store.results import CULPRIT_DIR, CULPRIT_FILE, culprit_records

# Where the answers are (read by `harness.store.results`, the store's reader of them).
__all__ = ["CULPRIT_DIR", "CULPRIT_FILE", "Culprit", "holding", "load_culprits"]

STALE = ("stale: the cells it searched between changed since ({cells}); "
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


def holding(found: Mapping[str, Culprit], results: Mapping[str, CellResult],
            root: Path | None) -> dict[str, Culprit]:
    """Each row's answer while G and B keep their run keys; else the stale note with the
    command that searches again. An answer without run keys stands."""
    out: dict[str, Culprit] = {}
    for row, found_row in found.items():
        changed = found_row.derived.changed(results) if found_row.derived else []
        if not changed:
            out[row] = found_row
            continue
        note = STALE.format(cells=", ".join(changed), root=root or "DIR", row=row)
        out[row] = Culprit(row, kinds.STALE, note, ())
    return out
