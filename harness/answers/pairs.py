"""Which pairs a row's first bad and last good cell make (`pairs`), the cells explain,
culprit and `--find-cause` take on, and the rows no pair is named for (`unpaired`); from
the rows' answers (`answers.search`), running nothing."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from harness.analysis.kinds import BAD
from harness.answers.search import answer_rows, free_of
from harness.result.model import CellResult, Planned


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
            # release that fixed it), where there is one (`free_of` its fault).
            fault = results[bad].verdict
            after = [cid for _, _, cid in row.cells
                     if cid in results and free_of(results[cid], fault)]
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
