"""One report model built from stored results; every renderer reads only this."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.analysis.kinds import BAD
from harness.answers.search import RowAnswer, answer_rows
from harness.report.parts import VsBaseline

RESULTS_SCHEMA = 1


def human_seconds(seconds: float) -> str:
    """0.0000159 -> '15.9 µs', 0.0123 -> '12.3 ms', 2.5 -> '2.5 s'."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


def cell_numbers(res: Mapping[str, Any]) -> str:
    """Key numbers of a cell, each saying what it is: growth per call of the deciding
    source, median time per call, and the ratios against the row's baseline."""
    parts: list[str] = []
    memory = res.get("memory") or {}
    source = (res.get("carrier") or "").split("+")[0] or None
    if source not in memory:
        source = next((s for s in ("heap", "uss", "rss") if s in memory), None)
    if source is not None:
        slope = float(memory[source]["slope"])
        parts.append(f"{source} {round(slope / 1024, 1) + 0.0:+.1f} KiB/call")  # no "-0.0"
    step = (res.get("summary") or {}).get("median_step_s")
    if step is not None:
        parts.append(f"{human_seconds(float(step))}/call")
    vs = VsBaseline.of(res)
    if vs is None:
        return ", ".join(parts)
    # The rounds' direction when they ran; a pooled one alone is only "suspected".
    conf, steps, peak = vs.confirmation, vs.steps, vs.peak_rss
    if conf is not None and conf.ratio is not None and vs.direction not in (None, "~"):
        parts.append(f"time {conf.ratio:.2f}x baseline ({vs.direction} in "
                     f"{conf.decided_by} interleaved rounds)")
    elif steps is not None and vs.direction not in (None, "~"):
        parts.append(f"time {steps.ratio:.2f}x baseline")
    if peak is not None and peak.direction not in (None, "~"):
        parts.append(f"peak RSS {peak.ratio:.2f}x baseline")
    return ", ".join(parts)


def cell_text(res: Mapping[str, Any]) -> str:
    """'leak: heap +5.9 KiB/call, 15.9 µs/call, peak RSS 1.12x baseline'."""
    numbers = cell_numbers(res)
    return f"{res['verdict']}: {numbers}" if numbers else str(res["verdict"])


@dataclass(frozen=True)
class Report:
    name: str
    images: list[str]
    rows: list[RowAnswer]
    results: dict[str, dict[str, Any]]
    meta: dict[str, Any]
    root: Path | None = None        # the results directory: samples.jsonl for plots

    @classmethod
    def from_results(cls, name: str, results: Mapping[str, dict[str, Any]],
                     meta: Mapping[str, Any] | None = None, root: Path | None = None
                     ) -> Report:
        """Build the model; `root` lets renderers read each cell's samples.jsonl."""
        order: dict[str, int] = {}
        for r in results.values():
            order.setdefault(r["image"]["label"], r["image"]["index"])
        images = sorted(order, key=lambda k: order[k])
        return cls(name, images, answer_rows(results), dict(results), dict(meta or {}), root)

    def samples_path(self, cell_id: str) -> Path | None:
        """Where a cell's samples.jsonl is, if the results directory is known and has it."""
        if self.root is None:
            return None
        path = self.root / "cells" / cell_id / "samples.jsonl"
        return path if path.is_file() else None

    @property
    def bad_cells(self) -> list[str]:
        return sorted(k for k, r in self.results.items() if r["verdict"] in BAD)

    @property
    def broken_scenarios(self) -> list[str]:
        """Rows whose scenario fails the same way on every image."""
        return [r.row for r in self.rows if r.scenario_error is not None]

    @property
    def findings(self) -> list[str]:
        """Bad cells, less those of rows where the scenario itself is broken."""
        broken = set(self.broken_scenarios)
        return [k for k in self.bad_cells if self.results[k]["row"] not in broken]

    @property
    def unavailable_cells(self) -> list[str]:
        return sorted(k for k, r in self.results.items() if r["verdict"] == "unavailable")

    def unavailable_notes(self) -> list[str]:
        """One line per image (and host) that could not be prepared, with the reason."""
        seen: dict[str, str] = {}
        for cid in self.unavailable_cells:
            res = self.results[cid]
            key = res["image"]["label"]
            seen.setdefault(key, str((res.get("outcome") or {}).get("error")
                                     or res.get("reason") or ""))
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

    def to_json(self) -> dict[str, Any]:
        cells = {k: {kk: vv for kk, vv in v.items() if kk != "host_samples"}
                 for k, v in sorted(self.results.items())}
        return {"schema": RESULTS_SCHEMA, "name": self.name, "meta": self.meta,
                "images": self.images, "rows": [r.to_dict() for r in self.rows],
                "bad_cells": self.bad_cells, "cells": cells}
