"""One report model built from cell results; every renderer reads only this."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from harness.analysis.kinds import BAD
from harness.answers.search import RowAnswer, answer_rows
from harness.result.codec import JSON, encode
from harness.result.model import CellResult
from harness.result.words import cell_text, human_seconds
from harness.store.results import SeriesCache

__all__ = ["RESULTS_SCHEMA", "Report", "Reporter", "cell_text", "human_seconds"]

RESULTS_SCHEMA = 2


@dataclass(frozen=True)
class Report:
    name: str
    images: list[str]
    rows: list[RowAnswer]
    results: dict[str, CellResult]
    meta: dict[str, JSON]
    root: Path | None = None        # the results directory: samples.jsonl for plots
    series: SeriesCache = field(default_factory=lambda: SeriesCache(None), compare=False)

    @classmethod
    def from_results(cls, name: str, results: Mapping[str, CellResult],
                     meta: Mapping[str, JSON] | None = None, root: Path | None = None,
                     series: SeriesCache | None = None) -> Report:
        """Build the model. Renderers get each cell's series through `series` (the
        sweep's, already parsed), else read once from `root`'s samples.jsonl."""
        order: dict[str, int] = {}
        for r in results.values():
            order.setdefault(r.image.label, r.image.index)
        images = sorted(order, key=order.__getitem__)
        return cls(name, images, answer_rows(results), dict(results), dict(meta or {}), root,
                   series or SeriesCache(root))

    @property
    def bad_cells(self) -> list[str]:
        return sorted(k for k, r in self.results.items() if r.verdict in BAD)

    @property
    def broken_scenarios(self) -> list[str]:
        """Rows whose scenario fails the same way on every image."""
        return [r.row for r in self.rows if r.scenario_error is not None]

    @property
    def findings(self) -> list[str]:
        """Bad cells, less those of rows where the scenario itself is broken."""
        broken = set(self.broken_scenarios)
        return [k for k in self.bad_cells if self.results[k].row not in broken]

    @property
    def unavailable_cells(self) -> list[str]:
        return sorted(k for k, r in self.results.items() if r.verdict == "unavailable")

    def unavailable_notes(self) -> list[str]:
        """One line per image (and host) that could not be prepared, with the reason."""
        seen: dict[str, str] = {}
        for cid in self.unavailable_cells:
            res = self.results[cid]
            seen.setdefault(res.image.label, res.outcome.error or res.reason)
        return [f"{label}: {text}" for label, text in seen.items()]

    def table(self) -> tuple[list[str], list[list[str]]]:
        """Header and rows: GPU x scenario down, images across, then the answer."""
        header = ["row", *self.images, "first bad / last good"]
        body: list[list[str]] = []
        for row in self.rows:
            by_image = {label: cid for label, _, cid in row.cells}
            cells = []
            for img in self.images:
                cid = by_image.get(img)
                if cid is None:
                    cells.append("")
                    continue
                res = self.results[cid]
                cells.append(cell_text(res))
            body.append([row.row, *cells, row.sentence])
        return header, body

    def to_json(self) -> dict[str, JSON]:
        """results.json: the rows' answers and every cell (without host samples)."""
        cells: dict[str, JSON] = {k: v.to_json(host_samples=False)
                                  for k, v in sorted(self.results.items())}
        rows: list[JSON] = [encode(r) for r in self.rows]
        return {"schema": RESULTS_SCHEMA, "name": self.name, "meta": self.meta,
                "images": list(self.images), "rows": rows,
                "bad_cells": list(self.bad_cells), "cells": cells}


R = TypeVar("R", bound="Reporter")


class Reporter:
    """A renderer over one Report: `Kind.from_results(report).render(out)`."""

    def __init__(self, report: Report):
        self.report = report

    @classmethod
    def from_results(cls: type[R], report: Report) -> R:
        return cls(report)
